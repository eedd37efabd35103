package lifecycle

import "context"

// Runner is the embeddable base of a component whose work is one run function: embedding it gives
// the component Start and Stop. Run gets a context that keeps Start's values, is detached from its
// cancellation, and ends with Stop; Stop waits for Run to return, or for its own context to end
// (then the error names Name). After Stop, Start runs Run again.
//
//	type Cleaner struct {
//		lifecycle.Runner
//		// ...
//	}
//
//	c := &Cleaner{}
//	c.Runner = lifecycle.Runner{Name: "retention cleaner", Run: c.run}
type Runner struct {
	// Name says what stops in Stop's error.
	Name string
	// Run is the component's work; it returns once its context has ended.
	Run func(ctx context.Context)

	loop Loop
}

// Start runs Run in a goroutine the Runner owns; while it runs, Start does nothing.
func (r *Runner) Start(ctx context.Context) error {
	r.loop.Start(ctx, r.Run)
	return nil
}

// Stop cancels Run's context and waits for it to return or for ctx to end. Safe twice and before
// Start.
func (r *Runner) Stop(ctx context.Context) error { return r.loop.Stop(ctx, r.Name) }

// Done is closed when Run has returned; nil before the first Start.
func (r *Runner) Done() <-chan struct{} { return r.loop.Done() }
