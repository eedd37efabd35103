package upstream

import (
	"context"
	"math"
	"sync"
	"time"
)

// LimiterConfig tunes a Limiter. Zero fields take their defaults.
type LimiterConfig struct {
	// Initial is the starting limit. Defaults to 16.
	Initial float64
	// Min and Max bound the limit. Default to 1 and 256.
	Min, Max float64
	// Backoff multiplies the limit on an overload signal. Defaults to 0.5.
	Backoff float64
	// LatencyTarget: a success slower than this does not grow the limit. Defaults to 5s.
	LatencyTarget time.Duration
}

func (c *LimiterConfig) defaults() {
	if c.Initial <= 0 {
		c.Initial = 16
	}
	if c.Min <= 0 {
		c.Min = 1
	}
	if c.Max <= 0 {
		c.Max = 256
	}
	if c.Backoff <= 0 || c.Backoff >= 1 {
		c.Backoff = 0.5
	}
	if c.LatencyTarget <= 0 {
		c.LatencyTarget = 5 * time.Second
	}
	c.Initial = math.Min(math.Max(c.Initial, c.Min), c.Max)
}

// Limiter is an additive-increase, multiplicative-decrease concurrency limit. Safe for concurrent use.
type Limiter struct {
	cfg      LimiterConfig
	mu       sync.Mutex
	limit    float64
	inflight int
	// window counts decreases; a call started before the latest decrease does not decrease again.
	window  uint64
	waiters []chan struct{}
}

// NewLimiter returns a limiter.
func NewLimiter(cfg LimiterConfig) *Limiter {
	cfg.defaults()
	return &Limiter{cfg: cfg, limit: cfg.Initial}
}

// Permit is one acquired slot. Release it exactly once.
type Permit struct {
	l      *Limiter
	start  time.Time
	window uint64
	once   sync.Once
}

// Acquire waits for a slot, or until ctx ends. Waiting is the point: a turn that cannot call its
// upstream yet keeps its worker slot instead of failing.
func (l *Limiter) Acquire(ctx context.Context) (*Permit, error) {
	return l.acquire(ctx, nil)
}

// acquire is Acquire calling waiting, when it is not nil, once as the first wait for a slot
// begins (never when a slot is free at once). An error from waiting ends the acquire with it.
func (l *Limiter) acquire(ctx context.Context, waiting func() error) (*Permit, error) {
	for {
		l.mu.Lock()
		if l.inflight < int(l.limit) {
			l.inflight++
			p := &Permit{l: l, start: time.Now(), window: l.window}
			l.mu.Unlock()
			return p, nil
		}
		ch := make(chan struct{})
		l.waiters = append(l.waiters, ch)
		l.mu.Unlock()
		if waiting != nil {
			err := waiting()
			waiting = nil
			if err != nil {
				l.forget(ch)
				return nil, err
			}
		}
		select {
		case <-ch:
		case <-ctx.Done():
			l.forget(ch)
			return nil, context.Cause(ctx)
		}
	}
}

// forget removes a waiter that gives up; a wake-up it received meanwhile is passed on, not lost.
func (l *Limiter) forget(ch chan struct{}) {
	l.mu.Lock()
	for i, w := range l.waiters {
		if w == ch {
			l.waiters = append(l.waiters[:i], l.waiters[i+1:]...)
			break
		}
	}
	l.mu.Unlock()
	select {
	case <-ch:
		l.wake()
	default:
	}
}

// wake lets waiters retry while there is room. Callers must not hold mu.
func (l *Limiter) wake() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for room := int(l.limit) - l.inflight; room > 0 && len(l.waiters) > 0; room-- {
		close(l.waiters[0])
		l.waiters = l.waiters[1:]
	}
}

// Release ends the call with its class: nil error means success. latency is what the latency target
// is compared with (for a streamed answer, the time to its first byte).
func (p *Permit) Release(outcome Class, failed bool, latency time.Duration) {
	p.once.Do(func() {
		l := p.l
		l.mu.Lock()
		l.inflight--
		switch {
		case !failed:
			// Grow only while the limit is in use (waiters, or at least half the slots busy): an
			// upstream that never sees the limit's concurrency has not shown it can take more.
			busy := len(l.waiters) > 0 || (l.inflight+1)*2 >= int(l.limit)
			if busy && latency <= l.cfg.LatencyTarget {
				l.limit = math.Min(l.cfg.Max, l.limit+1/l.limit)
			}
		case outcome == Overload:
			if p.window == l.window {
				l.limit = math.Max(l.cfg.Min, l.limit*l.cfg.Backoff)
				l.window++
			}
		}
		l.mu.Unlock()
		l.wake()
	})
}

// Started is when the permit was acquired.
func (p *Permit) Started() time.Time { return p.start }

// Resize moves the limit's bounds (an agents-file reload changed the agent's upstream limit): the
// limit is clamped into them and, when it grew, waiters are let in at once. Calls in flight above a
// lowered limit finish; no new one starts until the in-flight count is under it.
func (l *Limiter) Resize(minLimit, maxLimit float64) {
	l.mu.Lock()
	l.cfg.Min, l.cfg.Max = minLimit, maxLimit
	l.cfg.defaults()
	l.limit = math.Min(math.Max(l.limit, l.cfg.Min), l.cfg.Max)
	l.mu.Unlock()
	l.wake()
}

// Limit returns the current limit.
func (l *Limiter) Limit() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.limit
}

// Inflight returns the calls holding a slot.
func (l *Limiter) Inflight() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.inflight
}

// Waiting returns the calls waiting for a slot.
func (l *Limiter) Waiting() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.waiters)
}
