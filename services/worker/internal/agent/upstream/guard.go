package upstream

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/turnstile-run/turnstile/pkg/wire"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent"
)

// Config tunes a Guard. Zero fields take their defaults.
type Config struct {
	// Name identifies the upstream in errors and metrics.
	Name    string
	Limiter LimiterConfig
	// RetryRatio is the share of first attempts retries may add. Defaults to 0.2.
	RetryRatio float64
	// RetryReserve is the burst of retries allowed before first attempts earned any. Defaults to 10.
	RetryReserve int
	// RetryPerSecond is the steady refill of the retry reserve. Defaults to 1.
	RetryPerSecond float64
	// MaxRetries bounds the retries of a failed call on a turn's first attempt. Defaults to 3; a
	// later attempt's calls are not retried on failure, and overload refusals do not count against
	// it (they wait for Retry-After, the limit and the budget instead, until the deadline).
	MaxRetries int
	// Backoff is the base pause before a retry without Retry-After; it doubles per retry, with
	// jitter. Defaults to 100ms.
	Backoff time.Duration
	// Picker, when set, balances the upstream's requests over several endpoints (see Target):
	// the guard's limit and budget are then the upstream's total, overload signals shrink only
	// the answering endpoint's limit, and a retry spends from both budgets. Nil: one endpoint,
	// which the agent names itself.
	Picker Picker
}

// Guard wraps every call to one upstream. Safe for concurrent use.
type Guard struct {
	cfg     Config
	limiter *Limiter
	budget  *Budget
	calls   atomic.Int64
	outcome [3]atomic.Int64
}

// New returns a guard.
func New(cfg Config) *Guard {
	if cfg.MaxRetries <= 0 {
		cfg.MaxRetries = 3
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = 100 * time.Millisecond
	}
	if cfg.Name == "" {
		cfg.Name = "upstream"
	}
	return &Guard{cfg: cfg, limiter: NewLimiter(cfg.Limiter), budget: NewBudget(cfg.RetryRatio, cfg.RetryReserve, cfg.RetryPerSecond)}
}

// Balanced reports whether the guard picks an endpoint for each request (Config.Picker is set).
func (g *Guard) Balanced() bool { return g.cfg.Picker != nil }

// Limiter returns the guard's limiter.
func (g *Guard) Limiter() *Limiter { return g.limiter }

// Budget returns the guard's retry budget.
func (g *Guard) Budget() *Budget { return g.budget }

// Calls returns the calls made to the upstream (first attempts and retries).
func (g *Guard) Calls() int64 { return g.calls.Load() }

// Failures returns failed calls by class.
func (g *Guard) Failures(c Class) int64 { return g.outcome[c].Load() }

// Call is one attempt at an upstream call.
type Call struct {
	// Retry counts from 0 for the first attempt.
	Retry int
	// Target is the endpoint the guard's Picker chose for this request, nil without a Picker.
	Target    Target
	start     time.Time
	responded time.Time
	emitted   bool
}

// Responded marks that the upstream answered (headers or the first event): the latency measured
// against the target ends here, so a long stream is not mistaken for a slow upstream.
func (c *Call) Responded() {
	if c.responded.IsZero() {
		c.responded = time.Now()
	}
}

// Emitted marks that the call has passed output on to the sink: from now on it is not retried.
func (c *Call) Emitted() { c.emitted = true }

// GaveUpError is an upstream failure the guard stopped retrying: the turn's retries or the
// upstream's retry budget are spent, or the next try could not start before the deadline. It is
// final for the turn (it matches agent.ErrPermanent), so the worker fails the turn with the
// upstream's last answer instead of spending attempts that would repeat the same retries.
type GaveUpError struct {
	// Last is the upstream's last answer.
	Last error
	// Requests counts the requests of the call, the failed ones included.
	Requests int
	// Reason says why no retry follows.
	Reason string
}

func (e *GaveUpError) Error() string {
	return fmt.Sprintf("%v (after %d requests, no retry: %s)", e.Last, e.Requests, e.Reason)
}

func (e *GaveUpError) Unwrap() error { return e.Last }

// Is makes the error match agent.ErrPermanent.
func (e *GaveUpError) Is(target error) bool { return target == agent.ErrPermanent }

// waits passes a call's waits on to the turn's sink when it is an agent.Waiter.
type waits struct {
	ctx    context.Context
	to     agent.Waiter
	resume func()
}

func (w *waits) begin(wait agent.Wait) error {
	if w.to == nil {
		return nil
	}
	resume, err := w.to.Waiting(w.ctx, wait)
	if err != nil {
		return err
	}
	w.resume = resume
	return nil
}

func (w *waits) end() {
	if w.resume != nil {
		w.resume()
		w.resume = nil
	}
}

// Do runs fn, one request to the upstream, for an attempt of turn, under the limit, and retries
// what Classify says is worth retrying; see the package documentation for what bounds the requests
// a turn causes. Every wait (for a slot, for a retry) is announced to sink when it is an
// agent.Waiter. It returns nil, fn's last error, or a *GaveUpError carrying it when the guard
// stopped retrying it. Before each request sink is flushed when it is an agent.Flusher.
func (g *Guard) Do(ctx context.Context, turn agent.Turn, sink agent.Sink, fn func(ctx context.Context, c *Call) error) error {
	g.budget.First()
	w := &waits{ctx: ctx}
	w.to, _ = sink.(agent.Waiter)
	flusher, _ := sink.(agent.Flusher)
	// A later attempt exists because an earlier one failed (after it had streamed output, or with
	// its worker): it is itself the retry, so its failed requests are the worker's to retry.
	maxRetries := g.cfg.MaxRetries
	if turn.Attempt > 1 {
		maxRetries = 0
	}
	var (
		last     error
		previous Target
	)
	retries, requests := 0, 0
	for {
		permit, err := g.limiter.acquire(ctx, func() error {
			return w.begin(agent.Wait{Reason: wire.WaitConcurrencyLimit, Err: last})
		})
		w.end()
		if err != nil {
			return g.stopped(ctx, last, requests, fmt.Errorf("wait for a %s slot: %w", g.cfg.Name, err))
		}
		target, tpermit, err := g.pick(ctx, &turn, w, previous, last, requests == 0)
		if err != nil {
			permit.Release(Terminal, true, 0)
			return g.stopped(ctx, last, requests, err)
		}
		if flusher != nil {
			// The upstream answers later than a sink's hold of the attempt's first events lasts:
			// they go out while the request is under way.
			flusher.Flush()
		}
		g.calls.Add(1)
		requests++
		c := &Call{Retry: requests - 1, start: permit.Started(), Target: target}
		if tpermit != nil {
			c.start = tpermit.Started()
		}
		err = fn(ctx, c)
		latency := time.Since(c.start)
		if !c.responded.IsZero() {
			latency = c.responded.Sub(c.start)
		}
		class := Classify(err)
		if err != nil && ctx.Err() != nil {
			class = Terminal
		}
		total := class
		if target != nil {
			tpermit.Release(class, err != nil, latency)
			target.Finished(class, err, latency)
			if class == Overload {
				// One replica's refusal shrinks its own limit; the others may have room.
				total = Retryable
			}
		}
		permit.Release(total, err != nil, latency)
		if err == nil {
			return nil
		}
		g.outcome[class].Add(1)
		if class == Terminal || c.emitted {
			return err
		}
		last, previous = err, target
		if class == Retryable {
			switch {
			case retries >= maxRetries && turn.Attempt > 1:
				return err
			case retries >= maxRetries:
				return &GaveUpError{Last: err, Requests: requests, Reason: fmt.Sprintf("%d retries spent", retries)}
			case target != nil && !target.Budget().TryRetry():
				return &GaveUpError{Last: err, Requests: requests, Reason: "the retry budget of " + target.Address() + " spent"}
			case !g.budget.TryRetry():
				return &GaveUpError{Last: err, Requests: requests, Reason: g.cfg.Name + " retry budget spent"}
			}
			retries++
		}
		pause := RetryAfter(err)
		if pause <= 0 {
			d := g.cfg.Backoff << min(requests-1, 6)
			pause = d/2 + rand.N(d) //nolint:gosec // jitter needs no cryptographic randomness
		}
		next := time.Now().Add(pause)
		if dl, ok := ctx.Deadline(); ok && next.After(dl) {
			return &GaveUpError{Last: err, Requests: requests, Reason: fmt.Sprintf("a pause of %v ends after the deadline", pause.Round(time.Millisecond))}
		}
		if werr := w.begin(agent.Wait{Reason: waitReason(err, class), RetryAt: next, Err: err}); werr != nil {
			return errors.Join(err, werr)
		}
		werr := g.pause(ctx, class, next)
		w.end()
		if werr != nil {
			return g.stopped(ctx, err, requests, werr)
		}
	}
}

// pick asks the Picker, when there is one, for the endpoint of the next request and waits for a
// slot under that endpoint's own limit; first says the request is the call's first, which earns
// the endpoint's retry budget its share. Without a Picker both results are nil.
func (g *Guard) pick(ctx context.Context, turn *agent.Turn, w *waits, previous Target, last error, first bool) (Target, *Permit, error) {
	if g.cfg.Picker == nil {
		return nil, nil, nil
	}
	target, err := g.cfg.Picker.Pick(ctx, *turn, previous, last)
	if err != nil {
		return nil, nil, fmt.Errorf("pick a %s endpoint: %w", g.cfg.Name, err)
	}
	if first {
		target.Budget().First()
	}
	tpermit, err := target.Limiter().acquire(ctx, func() error {
		return w.begin(agent.Wait{Reason: wire.WaitConcurrencyLimit, Err: last})
	})
	w.end()
	if err != nil {
		target.Finished(Terminal, err, 0)
		return nil, nil, fmt.Errorf("wait for a slot of %s: %w", target.Address(), err)
	}
	return target, tpermit, nil
}

// pause waits until next, and first, for an overload refusal, for a retry the budget allows: the
// turn waits rather than fails, then tries the limit that has just shrunk.
func (g *Guard) pause(ctx context.Context, class Class, next time.Time) error {
	if class == Overload {
		if err := g.budget.Wait(ctx); err != nil {
			return err
		}
	}
	t := time.NewTimer(time.Until(next))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

// stopped is the error of a call whose wait ended with err: the upstream's last answer when the
// deadline ended it (the turn ran out of time because of that answer), both when the turn's context
// was ended otherwise (cancelled, drained: the caller branches on its cause).
func (g *Guard) stopped(ctx context.Context, last error, requests int, err error) error {
	switch {
	case last == nil:
		return err
	case errors.Is(context.Cause(ctx), context.DeadlineExceeded):
		return &GaveUpError{Last: last, Requests: requests, Reason: "the deadline passed while waiting"}
	default:
		return errors.Join(last, err)
	}
}
