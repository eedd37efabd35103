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
	require.True(t, res.OK(), "problems: %v", res.Problems)
	require.Zero(t, res.Retried, "no attempt was taken over")
	require.Equal(t, turns*tokens, res.Delivered)
	require.EqualValues(t, turns, chat.Requests())
	require.Positive(t, res.Delivery.N)
	require.Positive(t, res.Floor.N)
	require.Greater(t, res.PeakHeld, float64(turns)/2, "the turns overlapped on the worker")
	require.Positive(t, res.PublishesPerToken)
}
