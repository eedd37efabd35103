// Package roles lists every turnstile role in start order: the embedded broker first, so the roles
// after it can reach it, then the native roles, then the protocol front doors (a2a, aisdk, langgraph), which
// call intake and the gateway and so stop before them, the notifier, and the router (which runs
// in a process of its own, in front of regions).
package roles

import (
	"github.com/turnstile-run/turnstile/pkg/app"
	a2a "github.com/turnstile-run/turnstile/services/a2a"
	"github.com/turnstile-run/turnstile/services/aisdk"
	"github.com/turnstile-run/turnstile/services/gateway"
	"github.com/turnstile-run/turnstile/services/intake"
	"github.com/turnstile-run/turnstile/services/langgraph"
	"github.com/turnstile-run/turnstile/services/notifier"
	"github.com/turnstile-run/turnstile/services/router"
	"github.com/turnstile-run/turnstile/services/worker"
)

// All is every role in start order.
var All = []app.Role{app.BrokerRole, intake.Role, worker.Role, gateway.Role, a2a.Role, aisdk.Role, langgraph.Role, notifier.Role, router.Role}
