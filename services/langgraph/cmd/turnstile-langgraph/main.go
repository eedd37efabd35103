// Command turnstile-langgraph runs the langgraph role on its own: LangGraph-compatible threads and
// runs in front of intake and the gateway (TURNSTILE_INTAKE_URL, TURNSTILE_GATEWAY_URL).
package main

import (
	"github.com/turnstile-run/turnstile/pkg/app"
	"github.com/turnstile-run/turnstile/services/langgraph"
)

func main() { app.Main("langgraph", []app.Role{langgraph.Role}) }
