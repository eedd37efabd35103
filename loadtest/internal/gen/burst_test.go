package gen

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestAnalyseBurst checks the Little's-law arithmetic on a made-up timeline: ten seconds of normal
// load, a ten-second burst the workers serve at 100/s, then normal load the workers serve at
// 150/s. The workers' capacity with the generator idle (150/s) is not what they had during the
// burst, so the naive prediction is off by two while the load-matched one holds.
func TestAnalyseBurst(t *testing.T) {
	t.Parallel()
	const base, burstRate, normalRate = 10, 200, 50
	g := &Generator{}
	out := base
	for s := range 40 {
		sec := Second{T: s, Arrivals: normalRate, Completions: normalRate}
		switch {
		case s >= 10 && s < 20:
			sec.Arrivals, sec.Completions = burstRate, 100
		case s >= 20 && out > base:
			sec.Completions = min(150, out-base+normalRate)
		}
		out += sec.Arrivals - sec.Completions
		sec.Outstanding = out
		g.timeline = append(g.timeline, sec)
	}
	b := &Burst{
		CapacityPerSec: 150, BurstCapacityPerSec: 100, NormalCapacityPerSec: 150,
		NormalRate: normalRate, BurstRate: burstRate, BurstSeconds: 10,
	}
	g.AnalyseBurst(b, 0, 10*time.Second, 20*time.Second)

	require.InDelta(t, 1000, b.PredictedPeak, 1e-9, "(200-100)·10")
	require.InDelta(t, 1000, b.MeasuredPeak, 1e-9)
	require.InDelta(t, 10, b.PredictedDrainSec, 1e-9, "1000/(150-50)")
	require.InDelta(t, 10, b.MeasuredDrainSec, 1, "to the second")
	require.True(t, b.WithinFifteenPct)
	require.InDelta(t, 500, b.NaivePredictedPeak, 1e-9, "(200-150)·10")
	require.InDelta(t, 2, b.NaivePeakRatio, 1e-9)

	// Without a rehearsal the check falls back to the one capacity it has.
	b = &Burst{CapacityPerSec: 150, NormalRate: normalRate, BurstRate: burstRate, BurstSeconds: 10}
	g.AnalyseBurst(b, 0, 10*time.Second, 20*time.Second)
	require.InDelta(t, b.NaivePredictedPeak, b.PredictedPeak, 1e-9)
	require.False(t, b.WithinFifteenPct)
}

func TestPlannedPeak(t *testing.T) {
	b := &Burst{CapacityPerSec: 150, BurstCapacityPerSec: 100, NormalCapacityPerSec: 150, BurstRate: 300, BurstSeconds: 10}
	require.InDelta(t, 2000, b.PlannedPeak(), 1e-9, "(300-100)·10, the rehearsal's capacity at the burst rate")
	b = &Burst{CapacityPerSec: 150, BurstRate: 300, BurstSeconds: 10}
	require.InDelta(t, 1500, b.PlannedPeak(), 1e-9, "(300-150)·10 without a rehearsal")
	b = &Burst{CapacityPerSec: 400, BurstRate: 300, BurstSeconds: 10}
	require.Zero(t, b.PlannedPeak(), "a burst the workers keep up with leaves no backlog")
}

// TestBusyRate: the drain rate leaves out the edge seconds, and completions that all fell within
// two seconds still give a rate (over the seconds they fell in) instead of none.
func TestBusyRate(t *testing.T) {
	t.Parallel()
	rate := func(completions ...int) float64 {
		g := &Generator{}
		for s, c := range completions {
			g.timeline = append(g.timeline, Second{T: s, Completions: c})
		}
		return g.BusyRate(0, time.Duration(len(completions))*time.Second)
	}
	require.InDelta(t, 100, rate(0, 30, 100, 100, 20, 0), 1e-9, "edges left out")
	require.InDelta(t, 150, rate(0, 120, 180, 0), 1e-9, "two seconds: their mean")
	require.InDelta(t, 40, rate(0, 0, 40), 1e-9, "one second")
	require.Zero(t, rate(0, 0, 0), "no completion, no rate")
}
