package gen_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/turnstile-run/turnstile/loadtest/internal/gen"
	"github.com/turnstile-run/turnstile/loadtest/internal/stack"
	"github.com/turnstile-run/turnstile/pkg/demo"
	"github.com/turnstile-run/turnstile/pkg/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestSmoke runs the load generator for a few seconds against a whole in-process stack and requires
// a correct run: every turn accepted and finished once, its events as predicted and in order, and
// Postgres in agreement.
func TestSmoke(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 4})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := stack.Start(ctx, env.Config, "intake,worker,gateway", env.Log)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Stop(context.Background(), true)) })

	g := gen.New(gen.Config{
		IntakeURL: st.URL, Window: 8, TurnsPerSession: 3, Knobs: demo.Knobs{Tokens: 4},
		MetricsURLs: []string{st.URL + "/metrics"},
	})
	g.Start(ctx)
	g.Arrive(ctx, "smoke", 25, 3*time.Second)
	g.CloseSessions()
	require.True(t, g.WaitIdle(ctx, time.Minute), "every accepted turn reaches its terminal event")
	rep, err := g.Finish(ctx, "smoke", env.Pool)
	require.NoError(t, err)

	require.Positive(t, rep.Sent)
	require.Equal(t, rep.Sent, rep.Accepted, "refusals: %v", rep.Refused)
	require.Equal(t, rep.Accepted, rep.Completed)
	require.True(t, rep.Correctness.Postgres.Checked)
	require.True(t, rep.Correctness.OK(), "%+v", rep.Correctness)
	require.Equal(t, rep.Accepted, rep.TurnLatency.N)
	require.NotEmpty(t, rep.Timeline)
}
