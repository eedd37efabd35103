package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Group is a Component made of children that depend on each other in the order they were added:
// Start starts them in that order, and if one fails, stops the ones started before it (and the one
// that failed, which may have started parts of itself) in reverse order before returning the error;
// Stop stops every started child in reverse order, each with the same context, so the whole stop is
// bounded by that context's deadline (a child that does not stop in time is reported and the rest
// are still stopped). Start and Stop are serialised; after Stop, Start starts the children again.
type Group struct {
	mu       sync.Mutex
	children []child
	// started counts the children started by the last Start, which Stop stops.
	started int
}

type child struct {
	name string
	c    Component
}

// Add appends a child named name (the name prefixes its start error). Add before the first Start.
func (g *Group) Add(name string, c Component) *Group {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.children = append(g.children, child{name, c})
	return g
}

// Start starts the children in order. While started, Start does nothing. When a child fails to
// start, every child started so far is stopped with a context that keeps ctx's values but not its
// cancellation (what started must stop even when the caller has given up), and the error names the
// child.
func (g *Group) Start(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.started > 0 {
		return nil
	}
	for i, ch := range g.children {
		if err := ch.c.Start(ctx); err != nil {
			g.started = i + 1
			return errors.Join(fmt.Errorf("start %s: %w", ch.name, err), g.stopLocked(context.WithoutCancel(ctx)))
		}
	}
	g.started = len(g.children)
	return nil
}

// Stop stops the started children in reverse order and joins their errors. Safe twice and before
// Start.
func (g *Group) Stop(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.stopLocked(ctx)
}

func (g *Group) stopLocked(ctx context.Context) error {
	var errs []error
	for i := g.started - 1; i >= 0; i-- {
		if err := g.children[i].c.Stop(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	g.started = 0
	return errors.Join(errs...)
}
