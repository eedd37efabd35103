package quota_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/quota"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

// TestTokenMetricsBoundTenants: the first tenants to report usage have series of their own, the
// rest count under "other", and the sums over every series are the tokens reported.
func TestTokenMetricsBoundTenants(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m := quota.NewTokenMetrics(reg, 2)
	m.Add("acme", "support", wire.Usage{InputTokens: 10, OutputTokens: 4, Model: "m1"})
	m.Add("globex", "support", wire.Usage{InputTokens: 7, OutputTokens: 1, Model: "m1"})
	m.Add("initech", "support", wire.Usage{InputTokens: 5, OutputTokens: 2, Model: "m2"})
	m.Add("umbrella", "research", wire.Usage{InputTokens: 3, Model: "m2"})
	m.Add("acme", "support", wire.Usage{InputTokens: 1, OutputTokens: 1, Model: "m1"})

	want := `
# HELP turnstile_tokens_total Tokens reported by succeeded turns, by tenant (the first TURNSTILE_USAGE_METRIC_TENANTS tenants, then "other"), agent, direction (input, output) and model.
# TYPE turnstile_tokens_total counter
turnstile_tokens_total{agent="research",direction="input",model="m2",tenant="other"} 3
turnstile_tokens_total{agent="support",direction="input",model="m1",tenant="acme"} 11
turnstile_tokens_total{agent="support",direction="input",model="m1",tenant="globex"} 7
turnstile_tokens_total{agent="support",direction="input",model="m2",tenant="other"} 5
turnstile_tokens_total{agent="support",direction="output",model="m1",tenant="acme"} 5
turnstile_tokens_total{agent="support",direction="output",model="m1",tenant="globex"} 1
turnstile_tokens_total{agent="support",direction="output",model="m2",tenant="other"} 2
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "turnstile_tokens_total"))
}
