package quota

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnstile-run/turnstile/pkg/wire"
)

// OtherLabel is the tenant (or model) label of the tokens of every tenant (model) past a
// TokenMetrics' bound.
const OtherLabel = "other"

// MaxModelLabels bounds the model label of turnstile_tokens_total: model names come from the
// upstreams, so their number is not turnstile's to know.
const MaxModelLabels = 32

// TokenMetrics counts the tokens succeeded turns reported, as
// turnstile_tokens_total{tenant, agent, direction, model}. The tenant label is bounded: the first
// maxTenants tenants to report usage in the process's life have series of their own, the others
// count under tenant="other" (their exact usage is /v1/admin/usage's); models likewise past
// MaxModelLabels. Agents are the catalog's, bounded by configuration. Safe for concurrent use.
type TokenMetrics struct {
	tokens     *prometheus.CounterVec
	maxTenants int

	mu      sync.Mutex
	tenants map[string]struct{}
	models  map[string]struct{}
}

// NewTokenMetrics registers the counter on reg (nil: not exposed, still counted).
func NewTokenMetrics(reg prometheus.Registerer, maxTenants int) *TokenMetrics {
	m := &TokenMetrics{
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "turnstile_tokens_total",
			Help: "Tokens reported by succeeded turns, by tenant (the first TURNSTILE_USAGE_METRIC_TENANTS tenants, then \"other\"), agent, direction (input, output) and model.",
		}, []string{"tenant", "agent", "direction", "model"}),
		maxTenants: maxTenants,
		tenants:    map[string]struct{}{},
		models:     map[string]struct{}{},
	}
	if reg != nil {
		reg.MustRegister(m.tokens)
	}
	return m
}

// Add counts a succeeded turn's usage.
func (m *TokenMetrics) Add(tenant, agent string, u wire.Usage) {
	m.mu.Lock()
	tenant = bounded(m.tenants, tenant, m.maxTenants)
	model := bounded(m.models, u.Model, MaxModelLabels)
	m.mu.Unlock()
	if u.InputTokens > 0 {
		m.tokens.WithLabelValues(tenant, agent, "input", model).Add(float64(u.InputTokens))
	}
	if u.OutputTokens > 0 {
		m.tokens.WithLabelValues(tenant, agent, "output", model).Add(float64(u.OutputTokens))
	}
}

// bounded is v if it has a label of its own in seen or there is room for one, else OtherLabel.
func bounded(seen map[string]struct{}, v string, limit int) string {
	if _, ok := seen[v]; ok {
		return v
	}
	if len(seen) >= limit || v == OtherLabel {
		return OtherLabel
	}
	seen[v] = struct{}{}
	return v
}
