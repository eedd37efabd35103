package inflight_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/turnstile-run/turnstile/loadtest/internal/fakechat"
	"github.com/turnstile-run/turnstile/loadtest/internal/inflight"
	"github.com/turnstile-run/turnstile/loadtest/internal/stack"
	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestSmoke is the in-flight scenario in miniature: 300 turns of 20 tokens 100ms apart held at once
// by one in-process worker through the openai adapter, every token delivered once and in order.
func TestSmoke(t *testing.T) {
	t.Parallel()
	const turns, tokens, interval = 300, 20, 100 * time.Millisecond
	chat := &fakechat.Server{Interval: interval, Tokens: tokens}
	srv := httptest.NewServer(chat)
	t.Cleanup(srv.Close)

	env := testenv.New(t, testenv.Options{Partitions: 4})
	cfg := env.Config
	cfg.Agent, cfg.Agents.OpenAIBaseURL, cfg.Agents.OpenAIModel = "openai", srv.URL+"/v1", "fake"
	cfg.MaxInflight, cfg.Agents.UpstreamInitialLimit, cfg.Agents.UpstreamMaxLimit = turns, turns, turns
	// The default lease rather than testenv's two seconds, which under the race detector on a busy
	// machine can expire and hand a turn to a second attempt: this test is about holding turns.
	cfg.LeaseTTL, cfg.Heartbeat = config.LeaseTTLDefault, config.HeartbeatDefault
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := stack.Start(ctx, cfg, "intake,worker,gateway", env.Log)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Stop(context.Background(), true)) })

	res, err := inflight.Run(ctx, inflight.Config{
		IntakeURL: st.URL, WorkerMetricsURL: st.URL + "/metrics", Redis: env.Redis,
		FloorKey: cfg.KeyPrefix + ":floor", Turns: turns, Tokens: tokens, Interval: interval,
		Ramp: time.Second, Heartbeat: cfg.Heartbeat,
	})
	require.NoError(t, err)
	perTurn := res.HeapPerTurn + res.StackPerTurn
	t.Logf("%d turns, peak held %.0f; per held turn %.1f KiB (heap %.1f + stacks %.1f, %.2f goroutines) for the whole process",
		turns, res.PeakHeld, perTurn/1024, res.HeapPerTurn/1024, res.StackPerTurn/1024, res.GoroutinesPerTurn)
	t.Logf("posts sent again after backpressure: %d; metric scrapes missed: %d of %d", res.PostRetries, res.MissedSamples,
		res.MissedSamples+len(res.Timeline))
	require.True(t, res.OK(), "problems: %v", res.Problems)
	require.Zero(t, res.Retried, "no attempt was taken over")
	require.Equal(t, turns*tokens, res.Delivered)
	require.EqualValues(t, turns, chat.Requests())
	require.Positive(t, res.Delivery.N)
	require.Positive(t, res.Floor.N)
	require.Greater(t, res.PeakHeld, float64(turns)/2, "the turns overlapped on the worker")
	require.Positive(t, res.PublishesPerToken)
	// Here one process holds every end of each turn (generator, gateway stream, worker, model
	// stream over HTTP/1.1), so the figures are the whole process's: about 11 goroutines and
	// 180 KiB a held turn (275–305 KiB under the race detector, with the heap's garbage varying
	// with the collector's timing). The bounds catch a goroutine, or a buffer of a few hundred KiB,
	// added per turn; the worker's own figure is the full scenario's.
	require.LessOrEqual(t, res.GoroutinesPerTurn, 12.5, "goroutines per held turn")
	require.LessOrEqual(t, perTurn, float64(512<<10), "heap and stacks per held turn")
}
