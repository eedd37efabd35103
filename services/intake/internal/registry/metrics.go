package registry

import "github.com/prometheus/client_golang/prometheus"

type handlerMetrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

func newHandlerMetrics(reg prometheus.Registerer) *handlerMetrics {
	m := &handlerMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "turnstile_registry_requests_total",
			Help: "Agent registry requests by operation (register, renew, deregister, list, changes) and result (ok, stale, taken, invalid, shed, error, canceled).",
		}, []string{"op", "result"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "turnstile_registry_request_seconds",
			Help:    "Time an admitted agent registry request took, by operation.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"op"}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.latency)
	}
	return m
}

type sweepMetrics struct {
	instances *prometheus.GaugeVec
	guard     *prometheus.GaugeVec
	trips     *prometheus.CounterVec
	expired   *prometheus.CounterVec
	sweeps    *prometheus.CounterVec
}

func newSweepMetrics(reg prometheus.Registerer) *sweepMetrics {
	m := &sweepMetrics{
		instances: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "turnstile_registry_instances",
			Help: "Registrations of each agent as the last sweep found them, by state (live, expired, frozen).",
		}, []string{"agent", "state"}),
		guard: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "turnstile_registry_expiry_guard_active",
			Help: "1 while the mass-expiry guard holds an agent's deletions (more than TURNSTILE_REGISTRY_EXPIRY_GUARD percent of its registrations expired at once), else 0.",
		}, []string{"agent"}),
		trips: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "turnstile_registry_expiry_guard_trips_total",
			Help: "Sweeps in which the mass-expiry guard froze an agent's expired registrations instead of deleting them.",
		}, []string{"agent"}),
		expired: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "turnstile_registry_expired_total",
			Help: "Registrations the sweeper removed after their lease ran out, by agent.",
		}, []string{"agent"}),
		sweeps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "turnstile_registry_sweeps_total",
			Help: "Registry sweeps by result: ok, skipped (another intake replica held the sweep lock), error.",
		}, []string{"result"}),
	}
	if reg != nil {
		reg.MustRegister(m.instances, m.guard, m.trips, m.expired, m.sweeps)
	}
	return m
}
