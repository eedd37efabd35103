package backlog

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/lifecycle"
	"github.com/turnstile-run/turnstile/pkg/turnstore"
)

// Oldest queries the backlog age once; without a pool it fails.
func Oldest(ctx context.Context, pool *pgxpool.Pool) (time.Duration, error) {
	if pool == nil {
		return 0, errors.New("query backlog age: no Postgres pool")
	}
	return turnstore.New(pool).BacklogAge(ctx)
}

// Config tunes a Monitor.
type Config struct {
	// Interval between queries. Defaults to config.BacklogIntervalDefault.
	Interval time.Duration
	// Timeout of one query. Defaults to the interval, at least 1s.
	Timeout time.Duration
}

// Monitor polls the backlog age and serves it as a gauge and through Age.
type Monitor struct {
	cfg  Config
	pool *pgxpool.Pool
	log  *slog.Logger

	mu       sync.Mutex
	age      time.Duration
	measured chan struct{} // closed after the first successful measurement

	gauge    prometheus.GaugeFunc
	failures prometheus.Counter

	loop lifecycle.Loop
}

// New returns a monitor over pool; it registers turnstile_backlog_age_seconds and
// turnstile_backlog_query_failures_total with reg when reg is not nil.
func New(cfg Config, pool *pgxpool.Pool, log *slog.Logger, reg prometheus.Registerer) *Monitor {
	if cfg.Interval <= 0 {
		cfg.Interval = config.BacklogIntervalDefault
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = max(cfg.Interval, time.Second)
	}
	m := &Monitor{cfg: cfg, pool: pool, log: log, measured: make(chan struct{})}
	m.gauge = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "turnstile_backlog_age_seconds",
		Help: "Age of the oldest accepted turn that could start now but has not (queued, or its lease expired, and not behind its own session's running turn).",
	},
		func() float64 { return m.Age().Seconds() })
	m.failures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "turnstile_backlog_query_failures_total",
		Help: "Backlog-age queries that failed (the gauge then holds its last value).",
	})
	if reg != nil {
		reg.MustRegister(m.gauge, m.failures)
	}
	return m
}

// Start begins polling and returns at once. Safe twice.
func (m *Monitor) Start(ctx context.Context) error {
	m.loop.Start(ctx, m.run)
	return nil
}

// Stop ends polling and waits for it. Safe twice and before Start.
func (m *Monitor) Stop(ctx context.Context) error { return m.loop.Stop(ctx, "backlog monitor") }

func (m *Monitor) run(ctx context.Context) {
	m.Refresh(ctx)
	lifecycle.Every(ctx, m.cfg.Interval, m.Refresh)
}

// Refresh queries once and updates the value; the loop calls it every interval.
func (m *Monitor) Refresh(ctx context.Context) {
	qctx, cancel := context.WithTimeout(ctx, m.cfg.Timeout)
	defer cancel()
	age, err := Oldest(qctx, m.pool)
	if err != nil {
		if ctx.Err() == nil {
			m.failures.Inc()
			m.log.WarnContext(ctx, "backlog age query failed; holding the last value", "err", err)
		}
		return
	}
	m.mu.Lock()
	m.age = age
	select {
	case <-m.measured:
	default:
		close(m.measured)
	}
	m.mu.Unlock()
}

// Measured is closed once the first measurement succeeded.
func (m *Monitor) Measured() <-chan struct{} { return m.measured }

// Age is the backlog age at the last successful measurement. During a Postgres outage it holds that
// value rather than guessing: admission control reads it, and intake must keep accepting turns while
// Postgres is down.
func (m *Monitor) Age() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.age
}

// Gauge is the turnstile_backlog_age_seconds collector.
func (m *Monitor) Gauge() prometheus.Collector { return m.gauge }

// Failures is the turnstile_backlog_query_failures_total counter.
func (m *Monitor) Failures() prometheus.Counter { return m.failures }
