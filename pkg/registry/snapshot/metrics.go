package snapshot

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics exports the followers of one process. Register it once; every follower made with it
// is exported.
type Metrics struct {
	mu        sync.Mutex
	followers []*Follower

	age       *prometheus.Desc
	revision  *prometheus.Desc
	endpoints *prometheus.Desc
	refreshes *prometheus.CounterVec
}

// NewMetrics returns the collectors; reg may be nil.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		age: prometheus.NewDesc("turnstile_registry_snapshot_age_seconds",
			"Time since the registry last confirmed the worker's snapshot of an agent's registrations: grows while the registry cannot be reached, and the snapshot is served stale until TURNSTILE_REGISTRY_STALE_LIMIT.",
			[]string{"agent"}, nil),
		revision: prometheus.NewDesc("turnstile_registry_snapshot_revision",
			"Registry revision the worker's snapshot of an agent reflects.", []string{"agent"}, nil),
		endpoints: prometheus.NewDesc("turnstile_registry_snapshot_endpoints",
			"Endpoints in the worker's snapshot of an agent's registrations.", []string{"agent"}, nil),
		refreshes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "turnstile_registry_snapshot_refreshes_total",
			Help: "Refreshes of the worker's registry snapshots by result: delta (changes applied), reset (the whole set replaced the snapshot), error (the snapshot kept, stale).",
		}, []string{"agent", "result"}),
	}
	if reg != nil {
		reg.MustRegister(m)
	}
	return m
}

func (m *Metrics) add(f *Follower) {
	m.mu.Lock()
	m.followers = append(m.followers, f)
	m.mu.Unlock()
}

func (m *Metrics) refreshed(agent, result string) {
	if m != nil {
		m.refreshes.WithLabelValues(agent, result).Inc()
	}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.age
	ch <- m.revision
	ch <- m.endpoints
	m.refreshes.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	fs := append([]*Follower(nil), m.followers...)
	m.mu.Unlock()
	now := time.Now()
	for _, f := range fs {
		s := f.Current()
		if s == nil {
			continue
		}
		ch <- prometheus.MustNewConstMetric(m.age, prometheus.GaugeValue, s.Age(now).Seconds(), f.cfg.Agent)
		ch <- prometheus.MustNewConstMetric(m.revision, prometheus.GaugeValue, float64(s.Revision), f.cfg.Agent)
		ch <- prometheus.MustNewConstMetric(m.endpoints, prometheus.GaugeValue, float64(len(s.endpoints)), f.cfg.Agent)
	}
	m.refreshes.Collect(ch)
}
