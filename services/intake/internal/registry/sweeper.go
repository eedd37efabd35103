package registry

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/lifecycle"
	"github.com/turnstile-run/turnstile/pkg/registry"
)

// SweepConfig tunes a Sweeper. Zero fields take their defaults.
type SweepConfig struct {
	// Interval is the time between sweeps. Defaults to config.RegistrySweepIntervalDefault.
	Interval time.Duration
	// GuardShare is the share of an agent's registrations that may expire in one sweep; more (and
	// more than one) freezes them all. Defaults to config.RegistryExpiryGuardDefault percent.
	GuardShare float64
	// TombstoneTTL is how long a removal stays readable as a change. Defaults to
	// config.RegistryTombstoneTTLDefault.
	TombstoneTTL time.Duration
	// Timeout bounds one sweep. Defaults to 10s.
	Timeout time.Duration
	// Grace is how long a registration stays expired before the sweeper removes it; the guard
	// counts it from its expiry. Zero removes at once (tests).
	Grace time.Duration
	// Window is how long removals count toward the guard's share: leases of a partitioned zone
	// run out over a heartbeat's jitter, across several sweeps, and are one storm. Defaults to
	// config.RegistryLeaseDefault; intake passes the lease.
	Window time.Duration
	// Lease is what the registrations still frozen get back when the guard releases their agent
	// (see Store.Sweep). Defaults to config.RegistryLeaseDefault; intake passes the lease.
	Lease time.Duration
	// OnSweep, when set, learns of every sweep this replica made (ran false: another replica held
	// the lock), after its metrics are set. A test signal.
	OnSweep func(counts []AgentCount, ran bool, err error)
}

func (c *SweepConfig) defaults() {
	if c.Interval <= 0 {
		c.Interval = config.RegistrySweepIntervalDefault
	}
	if c.GuardShare <= 0 || c.GuardShare > 1 {
		c.GuardShare = float64(config.RegistryExpiryGuardDefault) / 100
	}
	if c.TombstoneTTL <= 0 {
		c.TombstoneTTL = config.RegistryTombstoneTTLDefault
	}
	if c.Timeout <= 0 {
		c.Timeout = 10 * time.Second
	}
	if c.Window <= 0 {
		c.Window = config.RegistryLeaseDefault
	}
	if c.Lease <= 0 {
		c.Lease = config.RegistryLeaseDefault
	}
}

// Sweeper removes registrations whose lease ran out, every Interval, behind the mass-expiry guard:
// when more than GuardShare of an agent's registrations expired at once, it removes none of them,
// marks them frozen, logs it at error level and raises turnstile_registry_expiry_guard_active, so
// a partition between the registry and a zone of replicas never erases a healthy fleet (DESIGN,
// invariant 17); the callers' local ejection keeps truly dead endpoints out of traffic. One sweep
// runs at a time across the intake replicas (a transaction-scoped advisory lock). It also purges
// tombstones older than TombstoneTTL.
type Sweeper struct {
	lifecycle.Runner
	cfg   SweepConfig
	store *Store
	log   *slog.Logger
	m     *sweepMetrics
	held  map[string]bool // agents whose guard held at the last sweep
	// removed are this replica's removals for expiry in the last Window, by agent. Sweeps of
	// other replicas are not in it: a fleet of intakes sweeping in turn sees less of a storm
	// spread over sweeps than one that keeps the lock.
	removed map[string][]removal
}

type removal struct {
	at time.Time
	n  int
}

func (s *Sweeper) recent(agent string) int {
	cut := time.Now().Add(-s.cfg.Window)
	keep := s.removed[agent][:0]
	n := 0
	for _, r := range s.removed[agent] {
		if r.at.After(cut) {
			keep = append(keep, r)
			n += r.n
		}
	}
	s.removed[agent] = keep
	return n
}

// NewSweeper returns a sweeper over store and registers its metrics.
func NewSweeper(cfg SweepConfig, store *Store, log *slog.Logger, reg prometheus.Registerer) *Sweeper {
	cfg.defaults()
	if log == nil {
		log = slog.Default()
	}
	s := &Sweeper{cfg: cfg, store: store, log: log, m: newSweepMetrics(reg), held: map[string]bool{}, removed: map[string][]removal{}}
	s.Runner = lifecycle.Runner{Name: "registry sweeper", Run: s.run}
	return s
}

func (s *Sweeper) run(ctx context.Context) {
	lifecycle.Every(ctx, s.cfg.Interval, func(ctx context.Context) { s.Sweep(ctx) })
}

// Sweep makes one sweep now.
func (s *Sweeper) Sweep(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	counts, ran, err := s.store.Sweep(ctx, s.cfg.GuardShare, s.cfg.Grace, s.cfg.Lease, s.cfg.TombstoneTTL, s.recent)
	switch {
	case err != nil:
		s.m.sweeps.WithLabelValues("error").Inc()
		if !errors.Is(err, context.Canceled) {
			s.log.Warn("registry sweep failed", "err", err)
		}
	case !ran:
		s.m.sweeps.WithLabelValues("skipped").Inc()
	default:
		s.m.sweeps.WithLabelValues("ok").Inc()
		s.report(counts)
	}
	if s.cfg.OnSweep != nil {
		s.cfg.OnSweep(counts, ran, err)
	}
}

// report sets the metrics of a sweep and logs what the guard did.
func (s *Sweeper) report(counts []AgentCount) {
	seen := map[string]bool{}
	for _, c := range counts {
		seen[c.Agent] = true
		live, frozen, expired := c.Total-c.Expired+len(c.Thawed), 0, max(0, c.Expired-len(c.Thawed)-len(c.Removed))
		if c.Held {
			frozen, expired = c.Expired, 0
		}
		s.m.instances.WithLabelValues(c.Agent, registry.StateLive).Set(float64(live))
		s.m.instances.WithLabelValues(c.Agent, registry.StateExpired).Set(float64(expired))
		s.m.instances.WithLabelValues(c.Agent, registry.StateFrozen).Set(float64(frozen))
		s.m.expired.WithLabelValues(c.Agent).Add(float64(len(c.Removed)))
		if len(c.Removed) > 0 {
			s.removed[c.Agent] = append(s.removed[c.Agent], removal{at: time.Now(), n: len(c.Removed)})
		}
		if len(c.Removed) > 0 {
			s.log.Info("registry sweep removed expired registrations", "agent", c.Agent, "removed", c.Removed,
				"registrations", c.Total)
		}
		switch {
		case c.Held:
			s.m.guard.WithLabelValues(c.Agent).Set(1)
			s.m.trips.WithLabelValues(c.Agent).Inc()
			s.log.Error("registry expiry storm: deletions frozen", "agent", c.Agent, "expired", c.Expired,
				"registrations", c.Total, "guard_share", s.cfg.GuardShare)
			s.held[c.Agent] = true
		case s.held[c.Agent] || len(c.Thawed) > 0:
			// Thawed without a hold seen here: another intake's sweep held it.
			s.m.guard.WithLabelValues(c.Agent).Set(0)
			s.log.Info("registry expiry guard released; the registrations still frozen get one more lease", "agent", c.Agent,
				"expired", c.Expired, "registrations", c.Total, "thawed", len(c.Thawed))
			delete(s.held, c.Agent)
		default:
			s.m.guard.WithLabelValues(c.Agent).Set(0)
		}
	}
	for agent := range s.held {
		if !seen[agent] {
			s.m.guard.WithLabelValues(agent).Set(0)
			delete(s.held, agent)
		}
	}
}
