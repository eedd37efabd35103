// Command turnstile-gateway runs the gateway role on its own: it streams session events to browsers
// over SSE.
package main

import (
	"github.com/turnstile-run/turnstile/pkg/app"
	"github.com/turnstile-run/turnstile/services/gateway"
)

func main() { app.Main("gateway", []app.Role{gateway.Role}) }
