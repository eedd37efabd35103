package worker

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/config"
)

// TestUpstreamMetrics builds an HTTP agent and reads its guard's state back through the registry,
// labelled with its upstream and its agent.
func TestUpstreamMetrics(t *testing.T) {
	cfg := config.Default()
	cfg.Agent = "http"
	cfg.Agents.HTTPAgentURL = "http://127.0.0.1:1/agent"
	reg := prometheus.NewRegistry()
	_, p, err := buildAgent(t.Context(), cfg, reg, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.NotNil(t, p, "an http agent calls its URL through a pool of one")
	want := `
# HELP turnstile_worker_upstream_limit Concurrency limit of an upstream's calls in flight to all its endpoints together.
# TYPE turnstile_worker_upstream_limit gauge
turnstile_worker_upstream_limit{agent="agent",upstream="http://127.0.0.1:1/agent"} 1024
# HELP turnstile_worker_upstream_endpoint_limit An endpoint's adaptive concurrency limit (AIMD).
# TYPE turnstile_worker_upstream_endpoint_limit gauge
turnstile_worker_upstream_endpoint_limit{agent="agent",endpoint="http://127.0.0.1:1/agent",upstream="http://127.0.0.1:1/agent"} 16
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "turnstile_worker_upstream_limit", "turnstile_worker_upstream_endpoint_limit"))
	n, err := testutil.GatherAndCount(reg)
	require.NoError(t, err)
	require.Equal(t, 10+10+5+14, n, "the guard's 10 (limit, in-flight, waiting, calls, four failure classes, retries, denied), "+
		"its waits begun and under way by five reasons, the pool's 5 and the endpoint's 14 (5 request outcomes)")
}
