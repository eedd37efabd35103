// Package roles lists every turnstile role in start order: the embedded broker first, so the roles
// after it can reach it, then the native roles, then the front doors that call them.
package roles

import (
	"github.com/turnstile-run/turnstile/pkg/app"
	"github.com/turnstile-run/turnstile/services/aisdk"
	"github.com/turnstile-run/turnstile/services/gateway"
	"github.com/turnstile-run/turnstile/services/intake"
	"github.com/turnstile-run/turnstile/services/worker"
)

// All is every role in start order.
var All = []app.Role{app.BrokerRole, intake.Role, worker.Role, gateway.Role, aisdk.Role}
