package upstream

import (
	"math"
	"sync"
)

// Budget lets retries spend at most Ratio of first attempts, plus a reserve of Reserve retries that
// refills from first attempts too. Safe for concurrent use.
type Budget struct {
	mu      sync.Mutex
	ratio   float64
	cap     float64
	tokens  float64
	first   int64
	retries int64
	denied  int64
}

// NewBudget returns a budget of ratio retries per first attempt, starting with (and holding at most)
// reserve unspent retries. Zero ratio defaults to 0.2, zero reserve to 10.
func NewBudget(ratio float64, reserve int) *Budget {
	if ratio <= 0 {
		ratio = 0.2
	}
	if reserve <= 0 {
		reserve = 10
	}
	return &Budget{ratio: ratio, cap: float64(reserve), tokens: float64(reserve)}
}

// First records a first attempt, which earns Ratio of a retry.
func (b *Budget) First() {
	b.mu.Lock()
	b.first++
	b.tokens = math.Min(b.cap, b.tokens+b.ratio)
	b.mu.Unlock()
}

// TryRetry spends one retry if the budget holds one.
func (b *Budget) TryRetry() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tokens < 1 {
		b.denied++
		return false
	}
	b.tokens--
	b.retries++
	return true
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

// Allowed is the most retries the budget can have granted for first attempts: reserve + ratio*first.
func (b *Budget) Allowed() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cap + b.ratio*float64(b.first)
}
