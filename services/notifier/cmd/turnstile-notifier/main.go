// Command turnstile-notifier runs the notifier role on its own: it delivers push notifications
// from the turns' outbox to clients' webhooks.
package main

import (
	"github.com/turnstile-run/turnstile/pkg/app"
	"github.com/turnstile-run/turnstile/services/notifier"
)

func main() { app.Main("notifier", []app.Role{notifier.Role}) }
