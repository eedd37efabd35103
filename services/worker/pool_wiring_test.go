package worker

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	sdk "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/a2a"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/pool"
)

// TestBuildAgentPool reads TURNSTILE_AGENT_ENDPOINTS for an A2A agent: a listed URL and an Agent
// Card, whose JSON-RPC URL joins the pool once the pool has started; the Agent Card is probed.
func TestBuildAgentPool(t *testing.T) {
	card := httptest.NewServer(a2asrv.NewStaticAgentCardHandler(&sdk.AgentCard{
		Name: "replica", URL: "http://127.0.0.1:1/rpc", PreferredTransport: sdk.TransportProtocolJSONRPC,
	}))
	t.Cleanup(card.Close)
	cfg := config.Default()
	cfg.Agent = "a2a"
	cfg.Agents.AgentEndpoints = "http://127.0.0.1:2/rpc, card+" + card.URL
	cfg.Agents.AgentPolicy = "least-request"
	_, p, err := buildAgent(t.Context(), cfg, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.Equal(t, a2a.ProbePath, p.Config().ProbePath)
	require.Equal(t, pool.LeastRequest, p.Config().Policy)
	require.Len(t, p.Stats().Endpoints, 1, "the listed URL is known at once")
	require.NoError(t, p.Start(t.Context()))
	t.Cleanup(func() { require.NoError(t, p.Stop(context.Background())) })
	require.Eventually(t, func() bool { return len(p.Stats().Endpoints) == 2 }, 10*time.Second, 5*time.Millisecond)

	cfg.Agents.AgentEndpoints = "ftp://nope"
	_, _, err = buildAgent(t.Context(), cfg, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	require.ErrorContains(t, err, "TURNSTILE_AGENT_ENDPOINTS")

	cfg.Agents.AgentEndpoints = ""
	cfg.Agents.A2AURL = ""
	_, _, err = buildAgent(t.Context(), cfg, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	require.ErrorContains(t, err, "TURNSTILE_A2A_URL")
}
