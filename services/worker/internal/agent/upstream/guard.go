package upstream

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"
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
	// MaxRetries bounds the retries of one call. Defaults to 3; overload refusals do not count
	// against it (they wait for the limit and the budget instead, until the deadline).
	MaxRetries int
	// Backoff is the base pause before a retry without Retry-After; it doubles per retry, with
	// jitter. Defaults to 100ms.
	Backoff time.Duration
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
	Retry     int
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

// Do runs fn under the limit, retrying what Classify says is worth retrying while the retry budget,
// MaxRetries and the deadline of ctx allow. It returns fn's last error.
func (g *Guard) Do(ctx context.Context, fn func(ctx context.Context, c *Call) error) error {
	g.budget.First()
	retries := 0
	for retry := 0; ; retry++ {
		permit, err := g.limiter.Acquire(ctx)
		if err != nil {
			return fmt.Errorf("wait for a %s slot: %w", g.cfg.Name, err)
		}
		g.calls.Add(1)
		c := &Call{Retry: retry, start: permit.Started()}
		err = fn(ctx, c)
		latency := time.Since(c.start)
		if !c.responded.IsZero() {
			latency = c.responded.Sub(c.start)
		}
		class := Classify(err)
		if err != nil && ctx.Err() != nil {
			class = Terminal
		}
		permit.Release(class, err != nil, latency)
		if err == nil {
			return nil
		}
		g.outcome[class].Add(1)
		if class == Terminal || c.emitted || (class == Retryable && retries >= g.cfg.MaxRetries) {
			return err
		}
		pause := RetryAfter(err)
		if pause <= 0 {
			d := g.cfg.Backoff << min(retry, 6)
			pause = d/2 + rand.N(d) //nolint:gosec // jitter needs no cryptographic randomness
		}
		if dl, ok := ctx.Deadline(); ok && time.Now().Add(pause).After(dl) {
			return fmt.Errorf("%w (no retry: a pause of %v ends after the deadline)", err, pause.Round(time.Millisecond))
		}
		if class == Overload {
			// The turn waits rather than fails: for a retry the budget allows, then (below) for the
			// pause, then for a slot of the limit that has just shrunk.
			if werr := g.budget.Wait(ctx); werr != nil {
				return errors.Join(err, werr)
			}
		} else if !g.budget.TryRetry() {
			return fmt.Errorf("%w (no retry: %s retry budget spent)", err, g.cfg.Name)
		}
		retries++
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, context.Cause(ctx))
		case <-t.C:
		}
	}
}
