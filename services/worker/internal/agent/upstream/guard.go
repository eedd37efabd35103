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
	// jitter, up to 64 times itself. Defaults to 100ms.
	Backoff time.Duration
	// MinUseful is the least time before a turn's deadline that a request to an unavailable
	// upstream is still worth making: the last try is made when the deadline leaves this much, and
	// the call gives up after it. The worker passes its minimum useful time
	// (TURNSTILE_MIN_USEFUL_TIME). Defaults to 0: the tries go on until the deadline.
	MinUseful time.Duration
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
	outcome [4]atomic.Int64
	// waited and waiting count the waits begun and under way, by reason (WaitReasons' order).
	waited, waiting [5]atomic.Int64
}

// WaitReasons are the reasons a call waits on its upstream (wire's Wait* reasons), in the order
// Waits reports them.
var WaitReasons = [5]string{
	wire.WaitRateLimited, wire.WaitOverloaded, wire.WaitRetryPause, wire.WaitConcurrencyLimit, wire.WaitUpstreamUnavailable,
}

// maxDoublings bounds the doublings of the backoff: the longest pause is about 64 × Backoff.
const maxDoublings = 6

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

// Waits returns, for each of WaitReasons, the waits of calls on the upstream begun so far (each
// wait for a slot, each pause before a retry) and those under way now.
func (g *Guard) Waits() (begun, now [5]int64) {
	for i := range WaitReasons {
		begun[i], now[i] = g.waited[i].Load(), g.waiting[i].Load()
	}
	return begun, now
}

// backoff is the jittered pause before the call's request number n+1 (n counts from 1): Backoff
// doubled n-1 times, at most maxDoublings, times a factor in [0.5, 1.5).
func (g *Guard) backoff(n int) time.Duration {
	d := g.cfg.Backoff << min(n-1, maxDoublings)
	return d/2 + rand.N(d) //nolint:gosec // jitter needs no cryptographic randomness
}

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
// upstream's retry budget are spent, or the next try could not start before the deadline (for an
// unavailable upstream: while the deadline leaves the minimum useful time). It is final for the
// turn (it matches agent.ErrPermanent), so the worker fails the turn with the upstream's last
// answer instead of spending attempts that would repeat the same retries.
type GaveUpError struct {
	// Last is the upstream's last answer.
	Last error
	// Requests counts the requests of the call, the failed ones included.
	Requests int
	// Reason says why no retry follows.
	Reason string
	// Wait is wire.WaitUpstreamUnavailable when the call gave up waiting for an upstream it
	// could not reach (the error then matches agent.ErrUnavailable), empty otherwise.
	Wait string
	// Took is how long the call waited for the unavailable upstream: from its first request that
	// found it unavailable to giving up. Zero unless Wait is set.
	Took time.Duration
}

func (e *GaveUpError) Error() string {
	if e.Wait != "" {
		return fmt.Sprintf("%s after %d requests over %v: %v (no retry: %s)", e.Wait, e.Requests, e.Took.Round(time.Millisecond), e.Last, e.Reason)
	}
	return fmt.Sprintf("%v (after %d requests, no retry: %s)", e.Last, e.Requests, e.Reason)
}

func (e *GaveUpError) Unwrap() error { return e.Last }

// Is makes the error match agent.ErrPermanent, and agent.ErrUnavailable when the call gave up
// waiting for an unavailable upstream.
func (e *GaveUpError) Is(target error) bool {
	return target == agent.ErrPermanent || target == agent.ErrUnavailable && e.Wait == wire.WaitUpstreamUnavailable
}

// outage is what a call knows of its upstream's unavailability: how many of its requests found the
// upstream unavailable, and when the first of them started.
type outage struct {
	tries int
	since time.Time
}

// gaveUp is the error of a call that stops retrying last after requests for reason; when last
// found the upstream unavailable, it names the wait and how long it lasted.
func (o outage) gaveUp(last error, requests int, reason string) *GaveUpError {
	e := &GaveUpError{Last: last, Requests: requests, Reason: reason}
	if o.tries > 0 && Classify(last) == Unavailable {
		e.Wait, e.Took = wire.WaitUpstreamUnavailable, time.Since(o.since)
	}
	return e
}

// waits passes a call's waits on to the turn's sink when it is an agent.Waiter, and counts them.
type waits struct {
	g      *Guard
	ctx    context.Context
	to     agent.Waiter
	resume func()
	// announced is the reason of the last wait the sink was told of other than as a Repeat.
	announced string
	// counted is the index in WaitReasons, plus one, of the wait under way; 0 when none is.
	counted int
}

func (w *waits) begin(wait agent.Wait) error {
	if w.to != nil {
		if wait.Repeat && w.announced != wait.Reason {
			// The wait the sink was last told of had another reason: this one is news.
			wait.Repeat = false
		}
		resume, err := w.to.Waiting(w.ctx, wait)
		if err != nil {
			return err
		}
		w.resume = resume
		if !wait.Repeat {
			w.announced = wait.Reason
		}
	}
	for i, r := range WaitReasons {
		if r == wait.Reason {
			w.g.waited[i].Add(1)
			w.g.waiting[i].Add(1)
			w.counted = i + 1
		}
	}
	return nil
}

func (w *waits) end() {
	if w.resume != nil {
		w.resume()
		w.resume = nil
	}
	if w.counted > 0 {
		w.g.waiting[w.counted-1].Add(-1)
		w.counted = 0
	}
}

// Do runs fn, one request to the upstream, for an attempt of turn, under the limit, and retries
// what Classify says is worth retrying; see the package documentation for what bounds the requests
// a turn causes. Every wait (for a slot, for a retry) is announced to sink when it is an
// agent.Waiter. It returns nil, fn's last error, or a *GaveUpError carrying it when the guard
// stopped retrying it. Before each request sink is flushed when it is an agent.Flusher.
func (g *Guard) Do(ctx context.Context, turn agent.Turn, sink agent.Sink, fn func(ctx context.Context, c *Call) error) error {
	g.budget.First()
	w := &waits{g: g, ctx: ctx}
	w.to, _ = sink.(agent.Waiter)
	flusher, _ := sink.(agent.Flusher)
	noter, _ := sink.(agent.EndpointNoter)
	// A later attempt exists because an earlier one failed (after it had streamed output, or with
	// its worker): it is itself the retry, so its failed requests are the worker's to retry.
	maxRetries := g.cfg.MaxRetries
	if turn.Attempt > 1 {
		maxRetries = 0
	}
	var (
		last     error
		previous Target
		down     outage
	)
	retries, requests := 0, 0
	for {
		permit, err := g.limiter.acquire(ctx, func() error {
			return w.begin(agent.Wait{Reason: wire.WaitConcurrencyLimit, Err: last})
		})
		w.end()
		if err != nil {
			return g.stopped(ctx, down, last, requests, fmt.Errorf("wait for a %s slot: %w", g.cfg.Name, err))
		}
		target, tpermit, err := g.pick(ctx, &turn, w, previous, last, requests == 0)
		if err != nil {
			permit.Release(Terminal, true, 0)
			return g.stopped(ctx, down, last, requests, err)
		}
		if noter != nil {
			addr := g.cfg.Name
			if target != nil {
				addr = target.Address()
			}
			noter.Endpoint(addr)
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
			if down.tries > 0 && !c.emitted && errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
				// The deadline ended a try of an upstream that was unavailable: that is the cause.
				return down.gaveUp(last, requests, "the deadline passed during the last try")
			}
			return err
		}
		last, previous = err, target
		if class == Unavailable {
			if down.tries == 0 {
				down.since = c.start
			}
			down.tries++
		}
		paced := false
		if class == Retryable {
			rot, _ := target.(Rotation)
			switch {
			case retries >= maxRetries && turn.Attempt > 1:
				return err
			case retries >= maxRetries:
				return &GaveUpError{Last: err, Requests: requests, Reason: fmt.Sprintf("%d retries spent", retries)}
			case rot != nil && rot.OutOfRotation():
				// The pool took the endpoint out of rotation: the retry goes to another one. That
				// is a failover, not more load on what failed, and a turn must not fail because
				// some replicas of a healthy fleet are cut off while others serve: a spent total
				// budget paces it, as it paces the tries of an unavailable upstream.
				paced = !g.budget.TryRetry()
			case target != nil && !target.Budget().TryRetry():
				return &GaveUpError{Last: err, Requests: requests, Reason: "the retry budget of " + target.Address() + " spent"}
			case !g.budget.TryRetry():
				return &GaveUpError{Last: err, Requests: requests, Reason: g.cfg.Name + " retry budget spent"}
			}
			retries++
		}
		pause := RetryAfter(err)
		if pause <= 0 {
			pause = g.backoff(requests)
		}
		if paced || class == Unavailable && !g.budget.TryRetry() {
			// The retry budget paces the tries of an unavailable upstream, and failovers, rather
			// than ending them: while it is spent, a try waits the longest pause.
			pause = max(pause, g.backoff(maxDoublings+1))
		}
		wait := agent.Wait{Reason: waitReason(err, class), Err: err}
		if class == Unavailable {
			wait.Tries = down.tries
			// Announced as the wait begins, then at the 2nd, 4th, 8th … try.
			wait.Repeat = down.tries&(down.tries-1) != 0
		}
		next := time.Now().Add(pause)
		if dl, ok := ctx.Deadline(); ok {
			switch latest := dl.Add(-g.cfg.MinUseful); {
			case class != Unavailable && next.After(dl):
				return &GaveUpError{Last: err, Requests: requests, Reason: fmt.Sprintf("a pause of %v ends after the deadline", pause.Round(time.Millisecond))}
			case class != Unavailable:
			case !time.Now().Before(latest):
				return down.gaveUp(err, requests, fmt.Sprintf("the deadline leaves less than the minimum useful time of %v", g.cfg.MinUseful))
			case next.After(latest):
				// The last try is made while the deadline still leaves the minimum useful time.
				next = latest
			}
		}
		wait.RetryAt = next
		if werr := w.begin(wait); werr != nil {
			return errors.Join(err, werr)
		}
		werr := g.pause(ctx, class, next)
		w.end()
		if werr != nil {
			return g.stopped(ctx, down, err, requests, werr)
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
func (g *Guard) stopped(ctx context.Context, down outage, last error, requests int, err error) error {
	switch {
	case last == nil:
		return err
	case errors.Is(context.Cause(ctx), context.DeadlineExceeded):
		return down.gaveUp(last, requests, "the deadline passed while waiting")
	default:
		return errors.Join(last, err)
	}
}
