package latency_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/turnstile-run/turnstile/loadtest/internal/gen"
	"github.com/turnstile-run/turnstile/loadtest/internal/latency"
	"github.com/turnstile-run/turnstile/loadtest/internal/stack"
	"github.com/turnstile-run/turnstile/pkg/demo"
	"github.com/turnstile-run/turnstile/pkg/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestSmoke is the latency scenario in miniature: a short calibration and three short levels
// against an in-process stack whose agent answers at once. It checks the report's shape and that
// the floor was measured beside every level, not the timings.
func TestSmoke(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 4})
	cfg := env.Config
	cfg.DemoDelay = 0
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	st, err := stack.Start(ctx, cfg, "intake,worker,gateway", env.Log)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Stop(context.Background(), true)) })

	g := gen.New(gen.Config{IntakeURL: st.URL, Window: 512, TurnsPerSession: 4, Knobs: demo.Knobs{Tokens: 2}})
	g.Start(ctx)
	rep, err := latency.Run(ctx, g, latency.Config{
		// A 4 s calibration spans inner seconds of completions even when a busy machine bunches
		// them, and 3 s levels give the lowest one turns to time.
		CalibrateRate: 200, Calibrate: 4 * time.Second, Level: 3 * time.Second, DrainMax: time.Minute,
		MetricsURL: st.URL + "/metrics",
		Floor:      latency.Floor{Brokers: st.Config.BrokerList(), Topic: cfg.Topic + "-floor", Redis: env.Redis, Key: cfg.KeyPrefix + ":floor"},
	})
	require.NoError(t, err)
	gr, err := g.Finish(ctx, "latency", env.Pool)
	require.NoError(t, err)
	require.True(t, gr.Correctness.OK(), "%+v", gr.Correctness)

	require.Positive(t, rep.Capacity.PerSec)
	require.Len(t, rep.Levels, 3)
	for i, f := range []float64{0.1, 0.5, 0.9} {
		l := rep.Levels[i]
		require.InDelta(t, f, l.Fraction, 1e-9)
		require.InDelta(t, f*rep.Capacity.PerSec, l.Rate, 1e-9)
		require.Positive(t, l.FirstDelta.N, "level %v timed no turn", f)
		require.Equal(t, l.FirstDelta.N, l.Started.N, "level %v: every timed turn has both events", f)
		require.Positive(t, l.Floor.N, "level %v: no floor beside it", f)
		require.Positive(t, l.Floor.P50)
		require.LessOrEqual(t, l.Started.P50, l.FirstDelta.P50, "turn.started comes first")
		require.InDelta(t, l.FirstDelta.P99-l.Floor.P99, l.AddedP99, 1e-9)
		for _, name := range latency.Stages() {
			require.Contains(t, l.StageMeanMs, name, "level %v: stage %s was read", f, name)
		}
		require.InDelta(t, l.Started.P50-l.Floor.P50, l.AddedStartedP50, 1e-9)
	}

	files, err := latency.Write(t.TempDir(), rep)
	require.NoError(t, err)
	require.Len(t, files, 2)
}
