package backlog

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnstile-run/turnstile/pkg/agents"
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
	// Agents is the current agents catalog: each agent's backlog is measured on its own (label
	// agent). Nil is the catalog of one default agent.
	Agents func() *agents.Catalog
}

// Monitor polls the backlog age and serves it as a gauge and through Age.
type Monitor struct {
	cfg  Config
	pool *pgxpool.Pool
	log  *slog.Logger

	mu       sync.Mutex
	ages     map[string]time.Duration // by agent
	paused   map[string]int           // by agent
	measured chan struct{}            // closed after the first successful measurement

	gauge    *prometheus.GaugeVec
	held     *prometheus.GaugeVec
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
	if cfg.Agents == nil {
		one := agents.FromConfig(config.Default())
		cfg.Agents = func() *agents.Catalog { return one }
	}
	m := &Monitor{cfg: cfg, pool: pool, log: log, measured: make(chan struct{}), ages: map[string]time.Duration{}, paused: map[string]int{}}
	m.gauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "turnstile_backlog_age_seconds",
		Help: "Age of the oldest accepted turn of the agent that could start now but has not (queued, or its lease expired, and not behind its own session's running turn).",
	}, []string{"agent"})
	m.held = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "turnstile_backlog_paused_turns",
		Help: "Queued turns of the agent held by a queue pause (POST /v1/admin/pauses): not backlog, since more workers cannot start them.",
	}, []string{"agent"})
	m.failures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "turnstile_backlog_query_failures_total",
		Help: "Backlog-age queries that failed (the gauge then holds its last value).",
	})
	if reg != nil {
		reg.MustRegister(m.gauge, m.held, m.failures)
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

// Refresh queries every agent's backlog once and updates the values; the loop calls it every
// interval. An agent whose query fails keeps its last value; an agent no longer in the catalog
// loses its series.
func (m *Monitor) Refresh(ctx context.Context) {
	cat := m.cfg.Agents()
	store := (*turnstore.Store)(nil)
	if m.pool != nil {
		store = turnstore.New(m.pool)
	}
	got := make(map[string]time.Duration, len(cat.Names()))
	paused := make(map[string]int, len(cat.Names()))
	ok := true
	for _, name := range cat.Names() {
		qctx, cancel := context.WithTimeout(ctx, m.cfg.Timeout)
		var age time.Duration
		var err error
		if store == nil {
			err = errors.New("query backlog age: no Postgres pool")
		} else {
			age, err = store.BacklogAgeOf(qctx, name, name == cat.Default)
			if err == nil {
				paused[name], err = store.PausedTurnsOf(qctx, name, name == cat.Default)
			}
		}
		cancel()
		if err != nil {
			ok = false
			if ctx.Err() == nil {
				m.failures.Inc()
				m.log.WarnContext(ctx, "backlog age query failed; holding the last value", "agent", name, "err", err)
			}
			continue
		}
		got[name] = age
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for name := range m.ages {
		if !slices.Contains(cat.Names(), name) {
			delete(m.ages, name)
			delete(m.paused, name)
			m.gauge.DeleteLabelValues(name)
			m.held.DeleteLabelValues(name)
		}
	}
	for name, age := range got {
		m.ages[name] = age
		m.gauge.WithLabelValues(name).Set(age.Seconds())
		m.paused[name] = paused[name]
		m.held.WithLabelValues(name).Set(float64(paused[name]))
	}
	if ok {
		select {
		case <-m.measured:
		default:
			close(m.measured)
		}
	}
}

// AgeOf is one agent's backlog age at its last successful measurement (0 before one).
func (m *Monitor) AgeOf(agent string) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ages[agent]
}

// PausedOf is the number of one agent's queued turns a queue pause held at the last successful
// measurement.
func (m *Monitor) PausedOf(agent string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.paused[agent]
}

// Paused is PausedOf summed over every agent.
func (m *Monitor) Paused() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, p := range m.paused {
		n += p
	}
	return n
}

// Measured is closed once the first measurement succeeded.
func (m *Monitor) Measured() <-chan struct{} { return m.measured }

// Age is the oldest agent's backlog age at the last successful measurement. During a Postgres
// outage it holds that value rather than guessing: admission control reads it, and intake must
// keep accepting turns while Postgres is down.
func (m *Monitor) Age() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	var oldest time.Duration
	for _, a := range m.ages {
		oldest = max(oldest, a)
	}
	return oldest
}

// Gauge is the turnstile_backlog_age_seconds collector.
func (m *Monitor) Gauge() *prometheus.GaugeVec { return m.gauge }

// Failures is the turnstile_backlog_query_failures_total counter.
func (m *Monitor) Failures() prometheus.Counter { return m.failures }
