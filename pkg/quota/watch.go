package quota

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnstile-run/turnstile/pkg/lifecycle"
)

// Snapshot is what a Watcher read at one refresh.
type Snapshot struct {
	// Quotas by tenant and agent ("" for the tenant's over all agents).
	Quotas map[Key]Quota
	// Running is the running turns per tenant and agent, and per tenant (Agent "").
	Running map[Key]int
	// Spent is each budgeted tenant's tokens in its current period.
	Spent map[string]int64
	At    time.Time
}

// MaxRunning is k's running cap, if it has one.
func (s *Snapshot) MaxRunning(k Key) (int, bool) {
	if s == nil {
		return 0, false
	}
	q, ok := s.Quotas[k]
	if !ok || q.MaxRunning == nil {
		return 0, false
	}
	return *q.MaxRunning, true
}

// Rate is k's rate quota, if it has one.
func (s *Snapshot) Rate(k Key) (int, bool) {
	if s == nil {
		return 0, false
	}
	q, ok := s.Quotas[k]
	if !ok || q.RatePerSecond == nil {
		return 0, false
	}
	return *q.RatePerSecond, true
}

// Exhausted reports whether tenant has spent its budget of the current period, and when that
// period ends.
func (s *Snapshot) Exhausted(tenant string, now time.Time) (bool, time.Time) {
	if s == nil {
		return false, time.Time{}
	}
	q, ok := s.Quotas[Key{Tenant: tenant}]
	if !ok || q.BudgetTokens == nil {
		return false, time.Time{}
	}
	return s.Spent[tenant] >= *q.BudgetTokens, Reset(q.BudgetPeriod, now)
}

// Watcher re-reads the quotas, the running counts and the budgeted tenants' usage every
// interval. It has the lifecycle of package lifecycle. Until its first refresh succeeds it has no
// snapshot, and every quota lookup says "no limit": quotas never stop turns because Postgres is
// unreachable (static stability); a failed refresh keeps the last snapshot.
type Watcher struct {
	store        *Store
	interval     time.Duration
	defaultAgent string
	log          *slog.Logger
	cur          atomic.Pointer[Snapshot]
	loop         lifecycle.Loop

	mu       sync.Mutex
	onChange []func(*Snapshot)
	// refreshed is the start of the last successful refresh (Register), nil unregistered.
	refreshed prometheus.Gauge
}

// Register exposes on reg, as turnstile_quota_refreshed_timestamp_seconds{role}, when the last
// successful refresh began: a replica whose value is later than a change through the API holds
// it, and one that falls behind is one that cannot read Postgres. Call before Start.
func (w *Watcher) Register(reg prometheus.Registerer, role string) {
	w.refreshed = prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "turnstile_quota_refreshed_timestamp_seconds",
		Help:        "Unix time at which the last successful re-read of the quotas began; a replica holds every change made before it.",
		ConstLabels: prometheus.Labels{"role": role},
	})
	reg.MustRegister(w.refreshed)
}

// NewWatcher returns a watcher of store; defaultAgent names the agent of turns that name none.
func NewWatcher(store *Store, interval time.Duration, defaultAgent string, log *slog.Logger) *Watcher {
	return &Watcher{store: store, interval: interval, defaultAgent: defaultAgent, log: log}
}

// OnRefresh registers f, called after every successful refresh with its snapshot. Call before
// Start; f must be quick.
func (w *Watcher) OnRefresh(f func(*Snapshot)) {
	w.mu.Lock()
	w.onChange = append(w.onChange, f)
	w.mu.Unlock()
}

// Snapshot is the last refresh's snapshot, nil before the first.
func (w *Watcher) Snapshot() *Snapshot { return w.cur.Load() }

// Start refreshes once at once and then every interval.
func (w *Watcher) Start(ctx context.Context) error {
	w.loop.Start(ctx, func(ctx context.Context) {
		w.Refresh(ctx)
		lifecycle.Every(ctx, w.interval, func(ctx context.Context) { w.Refresh(ctx) })
	})
	return nil
}

// Stop ends the refreshes.
func (w *Watcher) Stop(ctx context.Context) error { return w.loop.Stop(ctx, "quota watcher") }

// Refresh reads a new snapshot now; it reports whether it succeeded.
func (w *Watcher) Refresh(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, max(w.interval, time.Second))
	defer cancel()
	s, err := w.read(ctx)
	if err != nil {
		if ctx.Err() == nil {
			w.log.WarnContext(ctx, "quota refresh failed; the last quotas stay in force", "err", err)
		}
		return false
	}
	w.cur.Store(s)
	if w.refreshed != nil {
		w.refreshed.Set(float64(s.At.UnixNano()) / 1e9)
	}
	w.mu.Lock()
	fs := w.onChange
	w.mu.Unlock()
	for _, f := range fs {
		f(s)
	}
	return true
}

func (w *Watcher) read(ctx context.Context) (*Snapshot, error) {
	qs, err := w.store.List(ctx, "")
	if err != nil {
		return nil, err
	}
	s := &Snapshot{Quotas: make(map[Key]Quota, len(qs)), Spent: map[string]int64{}, At: time.Now()}
	capped := false
	for _, q := range qs {
		s.Quotas[Key{q.Tenant, q.Agent}] = q
		capped = capped || q.MaxRunning != nil
		if q.BudgetTokens != nil {
			n, err := w.store.Spent(ctx, q.Tenant, PeriodStart(q.BudgetPeriod, s.At))
			if err != nil {
				return nil, err
			}
			s.Spent[q.Tenant] = n
		}
	}
	if capped {
		if s.Running, err = w.store.running(ctx, w.defaultAgent); err != nil {
			return nil, err
		}
	}
	return s, nil
}
