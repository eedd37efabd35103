// Command turnstile-aisdk runs the aisdk role on its own: the AI SDK chat routes and the useChat
// page, in front of intake (TURNSTILE_INTAKE_URL) and the gateway (TURNSTILE_GATEWAY_URL).
package main

import (
	"github.com/turnstile-run/turnstile/pkg/app"
	"github.com/turnstile-run/turnstile/services/aisdk"
)

func main() { app.Main("aisdk", []app.Role{aisdk.Role}) }
