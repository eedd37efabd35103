package fairness_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/turnstile-run/turnstile/loadtest/internal/fairness"
	"github.com/turnstile-run/turnstile/pkg/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestSmoke is the fairness scenario scaled down to seconds: tenant a posts 200 half-second turns
// at once over 20 sessions to a worker of 8 slots (12.5 s of work), then b, c and d each post 2
// turns a second for 5 s, in three runs (fair, b–d alone, arrival order). It requires every turn
// accepted and finished, b–d's accept→start p99 beside a within their p99 alone + 1 s, the fair
// run's turns a second and a's share of the slots b–d leave at least 0.75 of the arrival-order
// run's (0.95 in the full scenario: the margin absorbs a busy 2-core machine, where the runs one
// after another get different shares of it), and arrival order to keep b–d waiting behind a (so
// the scenario can tell the schedulers apart). Half-second turns on 8 slots (16 turns a second)
// keep the worker's slots, not the machine, the bottleneck even in a race build.
func TestSmoke(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 4})
	cfg := env.Config
	cfg.KafkaBrokers = "" // each run starts its own embedded broker
	cfg.MaxInflight = 8
	cfg.Intake.TenantRate, cfg.Intake.TenantBurst = 100_000, 100_000
	cfg.Intake.MaxBacklogAge = time.Hour
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := fairness.Run(ctx, fairness.Config{
		Base: cfg, Log: env.Log,
		NoisyTurns: 200, NoisySessions: 20, Posters: 16,
		QuietTenants: 3, QuietSessions: 4, QuietRate: 2, QuietFor: 5 * time.Second,
		TurnMs: 500, DrainMax: 2 * time.Minute,
		P99Margin: time.Second, Fraction: 0.75,
		Progress: func(s string) { t.Log(s) },
	})
	require.NoError(t, err)
	t.Logf("b–d accept→start p50/p99: fair %.0f/%.0f ms, alone %.0f/%.0f ms, arrival %.0f/%.0f ms; turns/s fair %.1f arrival %.1f (%.2f); a %.1f of %.1f slots left (%.2f)",
		rep.Fair.Quiet.P50Ms, rep.Fair.Quiet.P99Ms, rep.Alone.Quiet.P50Ms, rep.Alone.Quiet.P99Ms, rep.Arrival.Quiet.P50Ms, rep.Arrival.Quiet.P99Ms,
		rep.Fair.TurnsPerSec, rep.Arrival.TurnsPerSec, rep.ThroughputRatio, rep.Fair.NoisyRunning, rep.LeftRunning, rep.NoisyShareRatio)
	require.Empty(t, rep.Notes)
	for _, p := range []fairness.Pass{rep.Alone, rep.Fair, rep.Arrival} {
		want := 3 * 10
		if p.Noisy {
			want += 200
		}
		require.GreaterOrEqual(t, p.Accepted, want, "%s: every post accepted", p.Name)
	}
	require.True(t, rep.P99Met, "b–d p99 %.0f ms beside a, limit %.0f ms", rep.Fair.Quiet.P99Ms, rep.P99LimitMs)
	require.True(t, rep.ThroughputMet, "turns/s fair/arrival %.2f", rep.ThroughputRatio)
	require.True(t, rep.NoisyShareMet, "a's share of what b–d left %.2f", rep.NoisyShareRatio)
	require.Greater(t, rep.Arrival.Quiet.P99Ms, rep.P99LimitMs, "arrival order keeps b–d behind a's backlog")
	require.True(t, rep.Met())
}
