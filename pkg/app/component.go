package app

import (
	"context"

	"github.com/go-chi/chi/v5"
)

// Component is a background part of a role with one lifecycle: Start returns once the component is
// running (its goroutines owned by it), Stop blocks until they have ended or ctx is done, and is safe
// to call twice or before Start.
type Component interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

// Router is implemented by components that serve HTTP routes.
type Router interface {
	Routes(r chi.Router)
}

// Readier is implemented by components whose readiness can go false (draining, not yet connected).
type Readier interface {
	Ready() bool
}

// Drainer is implemented by components that must be told to drain before the HTTP server stops
// (the gateway closes its streams so clients resume elsewhere).
type Drainer interface {
	Drain(ctx context.Context)
}

// Role names a component constructor.
type Role struct {
	Name string
	New  func(ctx context.Context, d *Deps) (Component, error)
}
