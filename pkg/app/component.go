package app

import (
	"context"

	"github.com/go-chi/chi/v5"

	"github.com/turnstile-run/turnstile/pkg/lifecycle"
)

// Component is a role's running part, with the one lifecycle of package lifecycle: Start returns
// once the component is running (its goroutines owned by it), Stop blocks until they have ended or
// ctx is done, and is safe to call twice, before Start and after a failed Start (then it stops
// whatever the failed Start had started).
type Component = lifecycle.Component

// Router is implemented by components that serve HTTP routes.
type Router interface {
	Routes(r chi.Router)
}

// Readier is implemented by components whose readiness can go false (draining, not yet connected):
// Ready returns nil when the component is ready, otherwise an error saying why not, which /readyz
// reports.
type Readier interface {
	Ready() error
}

// Drainer is implemented by components that must be told to drain before the HTTP server stops
// (the gateway closes its streams so clients resume elsewhere).
type Drainer interface {
	Drain(ctx context.Context)
}

// Role names a component constructor and the subcommands the role brings to every binary that
// includes it.
type Role struct {
	Name string
	New  func(ctx context.Context, d *Deps) (Component, error)
	// Commands are the role's subcommands (intake's `apikey`); see Command.
	Commands []Command
}
