// Command turnstile-a2a runs the A2A role on its own: an A2A JSON-RPC server and Agent Card in
// front of turnstile's native API (TURNSTILE_INTAKE_URL, TURNSTILE_GATEWAY_URL).
package main

import (
	"github.com/turnstile-run/turnstile/pkg/app"
	a2a "github.com/turnstile-run/turnstile/services/a2a"
)

func main() { app.Main("a2a", []app.Role{a2a.Role}) }
