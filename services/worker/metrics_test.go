package worker

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

// TestAttemptEnded counts attempts and observes their durations under their outcomes, the series
// looked up once and kept, as WithLabelValues on every call did.
func TestAttemptEnded(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newMetrics(reg)
	m.attemptEnded("agent", "succeeded", 2*time.Second)
	m.attemptEnded("agent", "succeeded", time.Second)
	m.attemptEnded("agent", "failed", 500*time.Millisecond)
	m.attemptEnded("other", "failed", time.Second)

	require.InDelta(t, 2, testutil.ToFloat64(m.attempts.WithLabelValues("agent", "succeeded")), 0)
	require.InDelta(t, 1, testutil.ToFloat64(m.attempts.WithLabelValues("agent", "failed")), 0)
	require.InDelta(t, 1, testutil.ToFloat64(m.attempts.WithLabelValues("other", "failed")), 0)
	mfs, err := reg.Gather()
	require.NoError(t, err)
	sums := map[string]float64{}
	counts := map[string]uint64{}
	for _, mf := range mfs {
		if mf.GetName() != "turnstile_worker_attempt_duration_seconds" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			outcome := mt.GetLabel()[0].GetValue() + "/" + mt.GetLabel()[1].GetValue()
			sums[outcome], counts[outcome] = mt.GetHistogram().GetSampleSum(), mt.GetHistogram().GetSampleCount()
		}
	}
	require.Equal(t, map[string]uint64{"agent/succeeded": 2, "agent/failed": 1, "other/failed": 1}, counts)
	require.InDelta(t, 3, sums["agent/succeeded"], 1e-9)
	require.InDelta(t, 0.5, sums["agent/failed"], 1e-9)
}
