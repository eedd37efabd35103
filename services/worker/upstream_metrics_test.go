package worker

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/upstream"
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

// TestEndpointLatencyByAgent: an endpoint's latency histogram names the agent the upstream serves,
// as every other upstream metric does.
func TestEndpointLatencyByAgent(t *testing.T) {
	reg := prometheus.NewRegistry()
	um := newUpstreamMetrics(reg)
	um.forName("research", "research").Request("http://10.0.0.1:8080/", upstream.Terminal, nil, 20*time.Millisecond)
	families, err := reg.Gather()
	require.NoError(t, err)
	var labels map[string]string
	for _, f := range families {
		if f.GetName() != "turnstile_worker_upstream_endpoint_latency_seconds" {
			continue
		}
		require.Len(t, f.GetMetric(), 1)
		labels = map[string]string{}
		for _, l := range f.GetMetric()[0].GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		require.Equal(t, uint64(1), f.GetMetric()[0].GetHistogram().GetSampleCount())
	}
	require.Equal(t, map[string]string{"upstream": "research", "agent": "research", "endpoint": "http://10.0.0.1:8080/", "outcome": "ok"}, labels)
}
