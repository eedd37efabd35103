package worker

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnstile-run/turnstile/services/worker/internal/agent/upstream"
)

// upstreamCollector exports the state of each upstream guard (adaptive limit, retry budget) at
// scrape time, so the hot path pays nothing for it.
type upstreamCollector struct {
	guards []*upstream.Guard
	names  []string

	limit, inflight, waiting, calls, failures, retries, denied *prometheus.Desc
}

func newUpstreamCollector() *upstreamCollector {
	l := []string{"upstream"}
	return &upstreamCollector{
		limit: prometheus.NewDesc("turnstile_worker_upstream_limit",
			"Current adaptive concurrency limit of an upstream (AIMD).", l, nil),
		inflight: prometheus.NewDesc("turnstile_worker_upstream_inflight",
			"Calls to an upstream in flight.", l, nil),
		waiting: prometheus.NewDesc("turnstile_worker_upstream_waiting",
			"Turns waiting for a slot under an upstream's limit.", l, nil),
		calls: prometheus.NewDesc("turnstile_worker_upstream_calls_total",
			"Calls made to an upstream.", l, nil),
		failures: prometheus.NewDesc("turnstile_worker_upstream_failures_total",
			"Failed upstream calls by class: overload, retryable, terminal.", []string{"upstream", "class"}, nil),
		retries: prometheus.NewDesc("turnstile_worker_upstream_retries_total",
			"Retries the retry budget granted.", l, nil),
		denied: prometheus.NewDesc("turnstile_worker_upstream_retries_denied_total",
			"Retries the retry budget refused.", l, nil),
	}
}

// add registers a guard under a name; call before the collector is registered.
func (c *upstreamCollector) add(name string, g *upstream.Guard) {
	c.names = append(c.names, name)
	c.guards = append(c.guards, g)
}

func (c *upstreamCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.limit, c.inflight, c.waiting, c.calls, c.failures, c.retries, c.denied} {
		ch <- d
	}
}

func (c *upstreamCollector) Collect(ch chan<- prometheus.Metric) {
	for i, g := range c.guards {
		name := c.names[i]
		lim := g.Limiter()
		ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, lim.Limit(), name)
		ch <- prometheus.MustNewConstMetric(c.inflight, prometheus.GaugeValue, float64(lim.Inflight()), name)
		ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(lim.Waiting()), name)
		ch <- prometheus.MustNewConstMetric(c.calls, prometheus.CounterValue, float64(g.Calls()), name)
		for _, cl := range []upstream.Class{upstream.Overload, upstream.Retryable, upstream.Terminal} {
			ch <- prometheus.MustNewConstMetric(c.failures, prometheus.CounterValue, float64(g.Failures(cl)), name, cl.String())
		}
		st := g.Budget().Stats()
		ch <- prometheus.MustNewConstMetric(c.retries, prometheus.CounterValue, float64(st.Retries), name)
		ch <- prometheus.MustNewConstMetric(c.denied, prometheus.CounterValue, float64(st.Denied), name)
	}
}
