package lifecycle

import (
	"context"
	"fmt"
)

// Component is the lifecycle every background part of turnstile has: Start returns at once with
// the work running in goroutines the component owns (an error means nothing of it is left
// running once Stop has been called); Stop ends that work and waits for it, returning an error
// when ctx ends first; both are safe to call twice and concurrently, and Stop is safe before
// Start and after a failed Start.
type Component interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

// Wait waits until done is closed or ctx ends; then the error names what was being waited for.
// It is how a Stop honours its context's deadline while the work it stopped winds down.
func Wait(ctx context.Context, done <-chan struct{}, what string) error {
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stop %s: %w", what, context.Cause(ctx))
	}
}

// StartFunc is a Group child that owns no goroutine: Start runs the function (a bounded piece of
// work the children after it need done first, such as reading what they will use), Stop does
// nothing.
type StartFunc func(ctx context.Context) error

// Start runs f.
func (f StartFunc) Start(ctx context.Context) error { return f(ctx) }

// Stop does nothing: a StartFunc leaves nothing running.
func (StartFunc) Stop(context.Context) error { return nil }
