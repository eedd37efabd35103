// Command turnstile runs any set of turnstile's roles in one process: TURNSTILE_ROLES is a comma
// list of broker, intake, worker, gateway, a2a, aisdk, langgraph, notifier and router (default: all
// but the router, which runs alone in front of regions). `make dev` runs every role on one port
// with the embedded Kafka broker; split across processes, one runs broker,intake,gateway and others
// run worker. `turnstile migrate [status]` applies (or lists) the database migrations and exits;
// `turnstile apikey create|list|revoke` (intake's command) manages API keys.
package main

import (
	"github.com/turnstile-run/turnstile/cmd/turnstile/roles"
	"github.com/turnstile-run/turnstile/pkg/app"
	"github.com/turnstile-run/turnstile/pkg/config"
)

func main() { app.Main(config.RolesDefault, roles.All) }
