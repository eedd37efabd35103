package worker

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/config"
)

// TestUpstreamMetrics builds an HTTP agent and reads its guard's state back through the registry.
func TestUpstreamMetrics(t *testing.T) {
	cfg := config.Default()
	cfg.Agent = "http"
	cfg.Agents.HTTPAgentURL = "http://127.0.0.1:1/agent"
	reg := prometheus.NewRegistry()
	_, err := buildAgent(t.Context(), cfg, reg)
	require.NoError(t, err)
	want := `
# HELP turnstile_worker_upstream_limit Current adaptive concurrency limit of an upstream (AIMD).
# TYPE turnstile_worker_upstream_limit gauge
turnstile_worker_upstream_limit{upstream="http://127.0.0.1:1/agent"} 16
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "turnstile_worker_upstream_limit"))
	n, err := testutil.GatherAndCount(reg)
	require.NoError(t, err)
	require.Equal(t, 9, n, "limit, in-flight, waiting, calls, three failure classes, retries, denied")
}
