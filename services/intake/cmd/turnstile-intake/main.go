// Command turnstile-intake runs the intake role on its own: it accepts turns over HTTP and writes
// them to Kafka. `turnstile-intake migrate` applies the database migrations and exits;
// `turnstile-intake apikey create|list|revoke` manages API keys.
package main

import (
	"github.com/turnstile-run/turnstile/pkg/app"
	"github.com/turnstile-run/turnstile/services/intake"
)

func main() { app.Main("intake", []app.Role{intake.Role}) }
