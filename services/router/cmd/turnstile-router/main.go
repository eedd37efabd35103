// Command turnstile-router runs the router role on its own: the stateless front of the regions of
// the region map (TURNSTILE_REGIONS_FILE or TURNSTILE_REGIONS), forwarding each request to the
// region that owns it.
package main

import (
	"github.com/turnstile-run/turnstile/pkg/app"
	"github.com/turnstile-run/turnstile/services/router"
)

func main() { app.Main("router", []app.Role{router.Role}) }
