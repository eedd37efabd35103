// Command turnstile-worker runs the worker role on its own: it consumes turns from Kafka and runs
// them. `turnstile-worker migrate` applies the database migrations and exits.
package main

import (
	"github.com/turnstile-run/turnstile/pkg/app"
	"github.com/turnstile-run/turnstile/services/worker"
)

func main() { app.Main("worker", []app.Role{worker.Role}) }
