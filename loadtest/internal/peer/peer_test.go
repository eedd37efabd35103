package peer

import (
	"testing"
	"time"
)

func TestCrossing(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t1 := t0.Add(100 * time.Millisecond)
	for _, c := range []struct {
		target, k0, k1 int
		want           time.Duration
	}{
		{target: 10, k0: 0, k1: 50, want: 20 * time.Millisecond},
		{target: 90, k0: 50, k1: 100, want: 80 * time.Millisecond},
		{target: 100, k0: 50, k1: 100, want: 100 * time.Millisecond},
		{target: 60, k0: 60, k1: 60, want: 100 * time.Millisecond}, // no growth: the later poll
	} {
		if got := crossing(c.target, c.k0, t0, c.k1, t1).Sub(t0); got != c.want {
			t.Errorf("crossing(%d, %d..%d) = %v, want %v", c.target, c.k0, c.k1, got, c.want)
		}
	}
}
