// Package roles lists every turnstile role in start order: the embedded broker first, so the roles
// after it can reach it, the langgraph front door after intake and the worker it calls, and the
// gateway last.
package roles

import (
	"github.com/turnstile-run/turnstile/pkg/app"
	"github.com/turnstile-run/turnstile/services/gateway"
	"github.com/turnstile-run/turnstile/services/intake"
	"github.com/turnstile-run/turnstile/services/langgraph"
	"github.com/turnstile-run/turnstile/services/worker"
)

// All is every role in start order.
var All = []app.Role{app.BrokerRole, intake.Role, worker.Role, langgraph.Role, gateway.Role}
