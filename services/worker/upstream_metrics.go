package worker

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnstile-run/turnstile/pkg/registry/snapshot"

	"github.com/turnstile-run/turnstile/services/worker/internal/agent/pool"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/upstream"
)

// upstreamCollector exports the state of each upstream guard (the agent's total limit and retry
// budget) and of its pool's endpoints at scrape time, so the hot path pays nothing for it.
type upstreamCollector struct {
	guards []*upstream.Guard
	pools  []*pool.Pool
	names  []string
	agents []string

	limit, inflight, waiting, calls, failures, retries, denied *prometheus.Desc
	waits, waitingNow                                          *prometheus.Desc

	endpoints, panic, panics, suspended, moved                         *prometheus.Desc
	epInflight, epLimit, epRequests, epEjected, epProbeOK, epEjections *prometheus.Desc
	epTaskNotFound, epSessions, epRetries, epDenied                    *prometheus.Desc
}

func newUpstreamCollector() *upstreamCollector {
	// agent names the catalog's agent whose upstream it is (with an agents file, upstream is the
	// agent's name too; without one, its URL).
	l := []string{"upstream", "agent"}
	e := []string{"upstream", "agent", "endpoint"}
	d := prometheus.NewDesc
	return &upstreamCollector{
		limit:    d("turnstile_worker_upstream_limit", "Concurrency limit of an upstream's calls in flight to all its endpoints together.", l, nil),
		inflight: d("turnstile_worker_upstream_inflight", "Calls to an upstream in flight.", l, nil),
		waiting:  d("turnstile_worker_upstream_waiting", "Turns waiting for a slot under an upstream's total limit.", l, nil),
		calls:    d("turnstile_worker_upstream_calls_total", "Calls made to an upstream.", l, nil),
		failures: d("turnstile_worker_upstream_failures_total",
			"Failed upstream calls by class: overload, retryable, unavailable, terminal.", []string{"upstream", "agent", "class"}, nil),
		waits: d("turnstile_worker_upstream_waits_total",
			"Waits of turns on an upstream begun, by reason: each wait for a slot, each pause before a retry.", []string{"upstream", "agent", "reason"}, nil),
		waitingNow: d("turnstile_worker_upstream_turns_waiting",
			"Turns waiting on an upstream now, by reason (for upstream_unavailable: between tries).", []string{"upstream", "agent", "reason"}, nil),
		retries: d("turnstile_worker_upstream_retries_total", "Retries the upstream's total retry budget granted.", l, nil),
		denied:  d("turnstile_worker_upstream_retries_denied_total", "Retries the upstream's total retry budget refused.", l, nil),

		endpoints: d("turnstile_worker_upstream_endpoints", "Endpoints an upstream's pool knows.", l, nil),
		panic: d("turnstile_worker_upstream_pool_panic",
			"1 while more than the panic threshold of an upstream's endpoints is unhealthy and every endpoint gets traffic.", l, nil),
		panics: d("turnstile_worker_upstream_pool_panics_total", "Times an upstream's pool entered panic.", l, nil),
		suspended: d("turnstile_worker_upstream_ejections_suspended_total",
			"Ejections not made because they would have left more than the panic threshold unusable.", l, nil),
		moved: d("turnstile_worker_upstream_sessions_moved_total",
			"Sessions placed on another endpoint than before (an endpoint joined, left or was ejected).", l, nil),
		epInflight: d("turnstile_worker_upstream_endpoint_inflight", "Requests in flight to an endpoint.", e, nil),
		epLimit:    d("turnstile_worker_upstream_endpoint_limit", "An endpoint's adaptive concurrency limit (AIMD).", e, nil),
		epRequests: d("turnstile_worker_upstream_endpoint_requests_total",
			"Requests an endpoint answered, by outcome: ok, overload, retryable, terminal.", []string{"upstream", "agent", "endpoint", "outcome"}, nil),
		epEjected:   d("turnstile_worker_upstream_endpoint_ejected", "1 while an endpoint is ejected.", e, nil),
		epProbeOK:   d("turnstile_worker_upstream_endpoint_probe_ok", "1 while an endpoint passes its probes (or none are configured).", e, nil),
		epEjections: d("turnstile_worker_upstream_endpoint_ejections_total", "Times an endpoint was ejected.", e, nil),
		epTaskNotFound: d("turnstile_worker_upstream_endpoint_task_not_found_total",
			"A2A \"task not found\" answers of an endpoint: requests routed to a replica without the task.", e, nil),
		epSessions: d("turnstile_worker_upstream_endpoint_sessions", "Sessions placed on an endpoint (affinity).", e, nil),
		epRetries:  d("turnstile_worker_upstream_endpoint_retries_total", "Retries an endpoint's retry budget granted.", e, nil),
		epDenied:   d("turnstile_worker_upstream_endpoint_retries_denied_total", "Retries an endpoint's retry budget refused.", e, nil),
	}
}

// add registers a guard and its pool (nil for none) under a name, of the catalog's agent agent;
// call before the collector is registered.
func (c *upstreamCollector) add(name, agent string, g *upstream.Guard, p *pool.Pool) {
	c.names = append(c.names, name)
	c.agents = append(c.agents, agent)
	c.guards = append(c.guards, g)
	c.pools = append(c.pools, p)
}

func (c *upstreamCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		c.limit, c.inflight, c.waiting, c.calls, c.failures, c.retries, c.denied, c.waits, c.waitingNow,
		c.endpoints, c.panic, c.panics, c.suspended, c.moved, c.epInflight, c.epLimit, c.epRequests,
		c.epEjected, c.epProbeOK, c.epEjections, c.epTaskNotFound, c.epSessions, c.epRetries, c.epDenied,
	} {
		ch <- d
	}
}

func gauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (c *upstreamCollector) Collect(ch chan<- prometheus.Metric) {
	for i, g := range c.guards {
		name, agent := c.names[i], c.agents[i]
		lim := g.Limiter()
		ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, lim.Limit(), name, agent)
		ch <- prometheus.MustNewConstMetric(c.inflight, prometheus.GaugeValue, float64(lim.Inflight()), name, agent)
		ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(lim.Waiting()), name, agent)
		ch <- prometheus.MustNewConstMetric(c.calls, prometheus.CounterValue, float64(g.Calls()), name, agent)
		for _, cl := range []upstream.Class{upstream.Overload, upstream.Retryable, upstream.Unavailable, upstream.Terminal} {
			ch <- prometheus.MustNewConstMetric(c.failures, prometheus.CounterValue, float64(g.Failures(cl)), name, agent, cl.String())
		}
		begun, now := g.Waits()
		for i, reason := range upstream.WaitReasons {
			ch <- prometheus.MustNewConstMetric(c.waits, prometheus.CounterValue, float64(begun[i]), name, agent, reason)
			ch <- prometheus.MustNewConstMetric(c.waitingNow, prometheus.GaugeValue, float64(now[i]), name, agent, reason)
		}
		st := g.Budget().Stats()
		ch <- prometheus.MustNewConstMetric(c.retries, prometheus.CounterValue, float64(st.Retries), name, agent)
		ch <- prometheus.MustNewConstMetric(c.denied, prometheus.CounterValue, float64(st.Denied), name, agent)
		if c.pools[i] != nil {
			c.collectPool(ch, name, agent, c.pools[i].Stats())
		}
	}
}

func (c *upstreamCollector) collectPool(ch chan<- prometheus.Metric, name, agent string, s pool.Stats) {
	ch <- prometheus.MustNewConstMetric(c.endpoints, prometheus.GaugeValue, float64(len(s.Endpoints)), name, agent)
	ch <- prometheus.MustNewConstMetric(c.panic, prometheus.GaugeValue, gauge(s.Panic), name, agent)
	ch <- prometheus.MustNewConstMetric(c.panics, prometheus.CounterValue, float64(s.Panics), name, agent)
	ch <- prometheus.MustNewConstMetric(c.suspended, prometheus.CounterValue, float64(s.Suspended), name, agent)
	ch <- prometheus.MustNewConstMetric(c.moved, prometheus.CounterValue, float64(s.Moves), name, agent)
	for _, e := range s.Endpoints {
		a := e.Address
		ch <- prometheus.MustNewConstMetric(c.epInflight, prometheus.GaugeValue, float64(e.Inflight), name, agent, a)
		ch <- prometheus.MustNewConstMetric(c.epLimit, prometheus.GaugeValue, e.Limit, name, agent, a)
		for outcome, n := range e.Requests {
			ch <- prometheus.MustNewConstMetric(c.epRequests, prometheus.CounterValue, float64(n), name, agent, a, outcome)
		}
		ch <- prometheus.MustNewConstMetric(c.epEjected, prometheus.GaugeValue, gauge(e.Ejected), name, agent, a)
		ch <- prometheus.MustNewConstMetric(c.epProbeOK, prometheus.GaugeValue, gauge(e.ProbeOK), name, agent, a)
		ch <- prometheus.MustNewConstMetric(c.epEjections, prometheus.CounterValue, float64(e.Ejections), name, agent, a)
		ch <- prometheus.MustNewConstMetric(c.epTaskNotFound, prometheus.CounterValue, float64(e.TaskNotFound), name, agent, a)
		ch <- prometheus.MustNewConstMetric(c.epSessions, prometheus.GaugeValue, float64(e.Sessions), name, agent, a)
		ch <- prometheus.MustNewConstMetric(c.epRetries, prometheus.CounterValue, float64(e.Retries), name, agent, a)
		ch <- prometheus.MustNewConstMetric(c.epDenied, prometheus.CounterValue, float64(e.RetryDenied), name, agent, a)
	}
}

// poolObserver is the pool.Observer that keeps each endpoint's latency histogram: the time to
// the answer's headers or first event of every request, by outcome.
type poolObserver struct {
	name, agent string
	latency     *prometheus.HistogramVec
}

func newPoolObserver(name string) *poolObserver {
	return &poolObserver{name: name, latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "turnstile_worker_upstream_endpoint_latency_seconds",
		Help:    "Time from an endpoint request's start to its answer's first byte (or its failure), by outcome.",
		Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	}, []string{"upstream", "agent", "endpoint", "outcome"})}
}

// upstreamMetrics are the upstream collectors of every agent a worker serves, registered once:
// each agent's guard and pool are added under its upstream name.
type upstreamMetrics struct {
	reg       prometheus.Registerer
	collector *upstreamCollector
	observer  *poolObserver
	once      sync.Once

	snapOnce  sync.Once
	snapshots *snapshot.Metrics
}

// snapshotMetrics returns the collectors of the registry snapshots, registered on first use.
func (u *upstreamMetrics) snapshotMetrics() *snapshot.Metrics {
	u.snapOnce.Do(func() { u.snapshots = snapshot.NewMetrics(u.reg) })
	return u.snapshots
}

// forName returns the pool observer of upstream name serving agent, registering the collectors on
// first use.
func (u *upstreamMetrics) forName(name, agent string) *poolObserver {
	u.once.Do(func() { u.reg.MustRegister(u.collector, u.observer) })
	return &poolObserver{name: name, agent: agent, latency: u.observer.latency}
}

func newUpstreamMetrics(reg prometheus.Registerer) *upstreamMetrics {
	return &upstreamMetrics{reg: reg, collector: newUpstreamCollector(), observer: newPoolObserver("")}
}

func (o *poolObserver) Request(endpoint string, class upstream.Class, err error, latency time.Duration) {
	outcome := "ok"
	if err != nil {
		outcome = class.String()
	}
	o.latency.WithLabelValues(o.name, o.agent, endpoint, outcome).Observe(latency.Seconds())
}

func (o *poolObserver) Describe(ch chan<- *prometheus.Desc) { o.latency.Describe(ch) }
func (o *poolObserver) Collect(ch chan<- prometheus.Metric) { o.latency.Collect(ch) }
