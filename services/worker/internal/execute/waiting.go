package execute

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/turnstile-run/turnstile/pkg/wire"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent"
	"github.com/turnstile-run/turnstile/services/worker/internal/consume"
)

var _ agent.Waiter = (*attemptSink)(nil)

// Waiting publishes turn.waiting (behind whatever is held, so turn.started comes first), logs the
// wait at info level, and marks the attempt as only waiting until resume is called: a drain that
// begins meanwhile ends the attempt's context with consume.ErrDraining, and the turn is handed off at once.
// A wait that repeats one announced before (agent.Wait.Repeat) is only logged, at debug level.
func (s *attemptSink) Waiting(ctx context.Context, w agent.Wait) (func(), error) {
	data := wire.WaitingData{EventBase: s.base(), Reason: w.Reason, Tries: w.Tries}
	if !w.RetryAt.IsZero() {
		data.RetryAt = w.RetryAt.UTC().Round(time.Millisecond)
	}
	if w.Err != nil {
		data.Error = w.Err.Error()
	}
	if !w.Repeat {
		s.waited.Add(1)
		if err := s.agentPublish(ctx, wire.NewEvent(wire.EventWaiting, data)); err != nil {
			return nil, err
		}
	}
	if level := waitLevel(w); s.log != nil && s.log.Enabled(ctx, level) {
		attrs := []slog.Attr{slog.Int("attempt", s.attempt), slog.String("reason", w.Reason)}
		if !w.RetryAt.IsZero() {
			attrs = append(attrs, slog.Time("retry_at", data.RetryAt), slog.Duration("in", time.Until(w.RetryAt).Round(time.Millisecond)))
		}
		if w.Tries > 0 {
			attrs = append(attrs, slog.Int("tries", w.Tries))
		}
		if w.Err != nil {
			attrs = append(attrs, slog.String("upstream_error", data.Error))
		}
		s.log.LogAttrs(ctx, level, "turn waiting on its upstream", attrs...)
	}
	if s.waits == nil {
		return func() {}, nil
	}
	return s.waits.begin(s.cancel), nil
}

// waitLevel is the level a wait is logged at: info, debug for a wait that repeats one announced.
func waitLevel(w agent.Wait) slog.Level {
	if w.Repeat {
		return slog.LevelDebug
	}
	return slog.LevelInfo
}

// waitSet knows the attempts that only wait on their upstream, so a drain hands them off at once:
// they hold no upstream request, and letting them sit out the drain's grace period would only delay
// the worker that takes them over. Its zero value is ready; safe for concurrent use.
type waitSet struct {
	mu       sync.Mutex
	draining bool
	drained  chan struct{}
	waiting  map[*waitingAttempt]struct{}
}

type waitingAttempt struct{ cancel context.CancelCauseFunc }

// begin marks an attempt (whose context cancel ends) as waiting; resume unmarks it. An attempt that
// begins to wait once the drain has begun is ended at once.
func (w *waitSet) begin(cancel context.CancelCauseFunc) (resume func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.draining {
		cancel(consume.ErrDraining)
		return func() {}
	}
	a := &waitingAttempt{cancel: cancel}
	if w.waiting == nil {
		w.waiting = map[*waitingAttempt]struct{}{}
	}
	w.waiting[a] = struct{}{}
	return func() {
		w.mu.Lock()
		delete(w.waiting, a)
		w.mu.Unlock()
	}
}

// done is closed when the drain begins.
func (w *waitSet) done() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.drained == nil {
		w.drained = make(chan struct{})
	}
	return w.drained
}

func (w *waitSet) drain() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.draining {
		return
	}
	w.draining = true
	if w.drained == nil {
		w.drained = make(chan struct{})
	}
	close(w.drained)
	for a := range w.waiting {
		a.cancel(consume.ErrDraining)
	}
	w.waiting = nil
}

// Drain tells the executor that the worker has begun to drain. Turns that only wait are handed off
// at once: those waiting on their upstream (a rate limit, a retry pause, a full concurrency limit;
// see agent.Waiter), and those pausing before their next attempt or re-checking a turn another
// worker holds. A turn that begins such a wait later is handed off as it begins. Running turns go on
// until the turn context ends (the drain's grace period). Safe to call more than once, and
// concurrently with Handle.
func (x *Executor) Drain() { x.waits.drain() }

// sleep pauses for d or until ctx ends or the drain begins; it reports whether the full pause
// elapsed.
func (x *Executor) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-x.waits.done():
		return false
	case <-t.C:
		return true
	}
}
