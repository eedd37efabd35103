// Package lifecycletest holds the start/stop stress check every component's tests run: the
// contract of package lifecycle, exercised the way concurrent callers and shutdown paths use it.
package lifecycletest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/lifecycle"
)

// Options tune Stress.
type Options struct {
	// Goroutines start and stop the component at once. Defaults to 4.
	Goroutines int
	// Rounds is how many Start/Stop pairs each goroutine runs. Defaults to 20.
	Rounds int
	// Timeout bounds the whole check's Starts and Stops. Defaults to 30s.
	Timeout time.Duration
	// OneShot says the component cannot start again once stopped (it closes what it was built
	// with): then Start after Stop must fail rather than run anything, and Stress leaves out the
	// Stop before Start (which would end the component before the concurrent rounds), so the
	// caller checks that on an instance of its own.
	OneShot bool
}

// Stress checks c against the lifecycle contract: Stop before Start returns nil (unless OneShot); several
// goroutines start and stop it at once, repeatedly, and no Stop fails (every call of either kind is
// bounded by Options.Timeout); then one Start (which fails for a OneShot component), a Stop and a
// second Stop leave it stopped. The race detector and the test binary's goleak check do the rest.
func Stress(t testing.TB, c lifecycle.Component, opts Options) {
	t.Helper()
	if opts.Goroutines == 0 {
		opts.Goroutines = 4
	}
	if opts.Rounds == 0 {
		opts.Rounds = 20
	}
	if opts.Timeout == 0 {
		opts.Timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), opts.Timeout)
	defer cancel()
	if !opts.OneShot {
		require.NoError(t, c.Stop(ctx), "Stop before Start")
	}
	var wg sync.WaitGroup
	errs := make(chan error, opts.Goroutines*opts.Rounds)
	for range opts.Goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range opts.Rounds {
				// A Start may lose to another goroutine's Stop (or find the component still stopping):
				// only Stop must always succeed.
				_ = c.Start(ctx)
				if err := c.Stop(ctx); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err, "Stop during concurrent starts and stops")
	}
	if opts.OneShot {
		require.Error(t, c.Start(ctx), "Start after Stop of a one-shot component")
	} else {
		require.NoError(t, c.Start(ctx), "Start after the concurrent rounds")
	}
	require.NoError(t, c.Stop(ctx))
	require.NoError(t, c.Stop(ctx), "Stop twice")
}

// Events is an ordered log of what the parts of a composed component did ("start a", "stop a"),
// safe for concurrent use: a test compares List with the order the composition promises.
type Events struct {
	mu  sync.Mutex
	got []string
}

// Add appends one event.
func (e *Events) Add(event string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, event)
}

// List returns the events so far, oldest first.
func (e *Events) List() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.got...)
}
