package lifecycle

import (
	"context"
	"fmt"
	"sync"
)

// Loop owns one background goroutine. The zero value is ready to use.
type Loop struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// Start runs fn in a new goroutine with a context that keeps ctx's values but not its cancellation
// (the component outlives the call that started it) and that Stop cancels. Start while running
// does nothing; after Stop, Start runs fn again.
func (l *Loop) Start(ctx context.Context, fn func(ctx context.Context)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cancel != nil {
		return
	}
	ctx, l.cancel = context.WithCancel(context.WithoutCancel(ctx))
	l.done = make(chan struct{})
	go func(done chan struct{}) {
		defer close(done)
		fn(ctx)
	}(l.done)
}

// Done is closed when the goroutine has ended; nil before the first Start.
func (l *Loop) Done() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.done
}

// Stop cancels the goroutine's context and waits for fn to return, or for ctx to end (then the
// error names what was being stopped). Safe twice and before Start.
func (l *Loop) Stop(ctx context.Context, what string) error {
	l.mu.Lock()
	cancel, done := l.cancel, l.done
	l.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("stop %s: %w", what, context.Cause(ctx))
	}
	l.mu.Lock()
	if l.done == done {
		l.cancel = nil // stopped: a later Start runs again
	}
	l.mu.Unlock()
	return nil
}
