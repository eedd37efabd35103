package upstream

import (
	"context"
	"math"
	"sync"
	"time"
)

// Budget lets retries spend at most Ratio of first attempts, plus a reserve that refills at a small
// steady rate so a quiet upstream can still be retried. Safe for concurrent use.
type Budget struct {
	mu      sync.Mutex
	ratio   float64
	cap     float64
	rate    float64
	tokens  float64
	last    time.Time
	start   time.Time
	first   int64
	retries int64
	denied  int64
	changed chan struct{}
}

// NewBudget returns a budget of ratio retries per first attempt plus perSecond retries per second,
// holding at most (and starting with) reserve unspent retries. Zero values default to 0.2, 10 and 1.
func NewBudget(ratio float64, reserve int, perSecond float64) *Budget {
	if ratio <= 0 {
		ratio = 0.2
	}
	if reserve <= 0 {
		reserve = 10
	}
	if perSecond <= 0 {
		perSecond = 1
	}
	now := time.Now()
	return &Budget{
		ratio: ratio, cap: float64(reserve), rate: perSecond, tokens: float64(reserve), last: now, start: now,
		changed: make(chan struct{}),
	}
}

// refill adds the steady rate since the last refill. Callers hold mu.
func (b *Budget) refill(now time.Time) {
	b.tokens = math.Min(b.cap, b.tokens+b.rate*now.Sub(b.last).Seconds())
	b.last = now
}

// First records a first attempt, which earns Ratio of a retry.
func (b *Budget) First() {
	b.mu.Lock()
	b.first++
	b.refill(time.Now())
	b.tokens = math.Min(b.cap, b.tokens+b.ratio)
	close(b.changed)
	b.changed = make(chan struct{})
	b.mu.Unlock()
}

// TryRetry spends one retry if the budget holds one.
func (b *Budget) TryRetry() bool {
	ok, _ := b.try()
	return ok
}

func (b *Budget) try() (bool, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(time.Now())
	if b.tokens < 1-1e-9 { // tolerate the rounding of summed ratios
		b.denied++
		return false, b.changed
	}
	b.tokens--
	b.retries++
	return true, nil
}

// Wait spends one retry, waiting until the budget holds one or ctx ends.
func (b *Budget) Wait(ctx context.Context) error {
	for {
		ok, changed := b.try()
		if ok {
			return nil
		}
		t := time.NewTimer(time.Duration(float64(time.Second) / b.rate))
		select {
		case <-ctx.Done():
			t.Stop()
			return context.Cause(ctx)
		case <-changed:
		case <-t.C:
		}
		t.Stop()
	}
}

// BudgetStats are a budget's counters.
type BudgetStats struct {
	First, Retries, Denied int64
}

// Stats returns the counters.
func (b *Budget) Stats() BudgetStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return BudgetStats{First: b.first, Retries: b.retries, Denied: b.denied}
}

// Allowed is the most retries the budget can have granted so far: reserve + ratio × first attempts
// + rate × seconds since it was made.
func (b *Budget) Allowed() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cap + b.ratio*float64(b.first) + b.rate*time.Since(b.start).Seconds()
}
