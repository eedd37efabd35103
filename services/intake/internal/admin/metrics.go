package admin

import "github.com/prometheus/client_golang/prometheus"

// jobMetrics are a Runner's metrics: what its jobs did to their items, the jobs it runs now, and
// how they ended. Items are counted once their outcome is committed, so a batch recorded by no
// one (the lease was lost) is not counted.
type jobMetrics struct {
	items    *prometheus.CounterVec
	running  prometheus.Gauge
	finished *prometheus.CounterVec
}

func newJobMetrics(reg prometheus.Registerer) *jobMetrics {
	m := &jobMetrics{
		items: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "turnstile_admin_jobs_items_total",
			Help: "Items of bulk admin jobs acted on by this process, by action (cancel, replay) and result (done, skipped, failed; retried: a transient error left the item pending).",
		}, []string{"action", "result"}),
		running: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "turnstile_admin_jobs_running",
			Help: "Bulk admin jobs this process holds the lease of and runs now.",
		}),
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "turnstile_admin_jobs_finished_total",
			Help: "Bulk admin jobs this process ended, by action and final state (succeeded, cancelled).",
		}, []string{"action", "state"}),
	}
	for _, a := range []string{ActionCancel, ActionReplay} {
		for _, r := range []string{outcomeDone, outcomeSkipped, outcomeFailed, "retried"} {
			m.items.WithLabelValues(a, r)
		}
		for _, s := range []string{JobSucceeded, JobCancelled} {
			m.finished.WithLabelValues(a, s)
		}
	}
	if reg != nil {
		reg.MustRegister(m.items, m.running, m.finished)
	}
	return m
}
