package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Worker settings defaults.
const (
	WorkerSessionTimeoutDefault   = 10 * time.Second
	WorkerRebalanceTimeoutDefault = 60 * time.Second
	RetentionIntervalDefault      = time.Minute
	RetentionBatchDefault         = 1000
	WorkerVacuumDefault           = "auto"
	WorkerReadAheadDefault        = 32768
	WorkerSchedulerDefault        = "fair"
	QuotaRefreshDefault           = time.Second
	UsageMetricTenantsDefault     = 50
	WorkerPresenceIntervalDefault = 2 * time.Second
)

// WorkerSettings are the worker's settings beyond the shared ones.
// Each field documents its variable and default; applyDefaults fills zero fields and validate
// reports every bound violated.
type WorkerSettings struct {
	// SessionTimeout is the consumer-group session timeout: how long a worker that stopped
	// heartbeating (killed, partitioned) keeps its partitions before the group gives them to
	// another worker. The group heartbeat runs at a tenth of it (at most 3s). It must lie within
	// the broker's group.min/max.session.timeout.ms (Kafka's default minimum is 6s). It stays below
	// the lease TTL so that after a crash the dead worker's leases, not the group, set when its
	// turns are taken over (README, "Takeover after a worker dies"); at the Kafka client's default
	// of 45s a replacement would wait 45s for partitions whose turns it could claim at 15s.
	// Defaults to 10s.
	SessionTimeout time.Duration `env:"TURNSTILE_WORKER_SESSION_TIMEOUT"`
	// RebalanceTimeout bounds how long members may take to rejoin during a rebalance. Defaults to
	// 60s.
	RebalanceTimeout time.Duration `env:"TURNSTILE_WORKER_REBALANCE_TIMEOUT"`
	// RetentionInterval is how often a worker deletes finished turn rows older than
	// TURNSTILE_RETENTION. Defaults to 1m.
	RetentionInterval time.Duration `env:"TURNSTILE_RETENTION_INTERVAL"`
	// RetentionBatch is how many rows one retention delete statement removes at most, so
	// retention never holds long locks. Defaults to 1000.
	RetentionBatch int `env:"TURNSTILE_RETENTION_BATCH"`
	// Vacuum is "auto" or "off". With auto, while Postgres's autovacuum does not cover the turns,
	// sessions and turn_attempts tables (it is off), workers vacuum them when dead rows pass 5% of live rows (at
	// least 5,000; services/worker/internal/vacuum). Defaults to auto.
	Vacuum string `env:"TURNSTILE_WORKER_VACUUM"`
	// ReadAhead bounds the turns each of a worker's agents has fetched and not started (its
	// read-ahead): the fair scheduler chooses among them, so it must reach past a noisy tenant's
	// backlog to the other tenants' turns. Fetching pauses when it is full. A turn costs about
	// 0.6 KiB of memory here (docs/BENCHMARKS.md, "Read-ahead"). Defaults to 32768.
	ReadAhead int `env:"TURNSTILE_WORKER_READ_AHEAD"`
	// Scheduler is fair (the next turn goes to the tenant furthest behind its weighted share,
	// then the highest priority) or arrival (the oldest ready turn, whatever its tenant and
	// priority; for comparison). Defaults to fair.
	Scheduler string `env:"TURNSTILE_WORKER_SCHEDULER"`
	// TenantWeights are the tenants' weights in the fair scheduler, as tenant=weight pairs
	// separated by commas (a=2,b=0.5): while both have turns ready, a tenant of weight 2 starts
	// twice as many as one of weight 1. A tenant not named weighs 1. Defaults to none.
	TenantWeights string `env:"TURNSTILE_TENANT_WEIGHTS"`
	// QuotaRefresh is how often workers and intake re-read the quotas set through
	// /v1/admin/quotas, the running turns they count and the tenants' token usage: a change is in
	// force on every replica within about this long. Defaults to 1s.
	QuotaRefresh time.Duration `env:"TURNSTILE_QUOTA_REFRESH"`
	// UsageMetricTenants bounds the tenant label of turnstile_tokens_total: the first this many
	// tenants to report token usage in a worker's life have series of their own, the others count
	// under tenant "other" (GET /v1/admin/usage has every tenant's). Defaults to 50.
	UsageMetricTenants int `env:"TURNSTILE_USAGE_METRIC_TENANTS"`
	// PresenceInterval is how often a worker writes its row of worker_heartbeats (identity,
	// version, agents, turns in flight, draining) and reads whether an operator asked it to drain
	// (POST /v1/admin/workers/{identity}/drain). A worker is shown alive while its row is younger
	// than three intervals. Defaults to 2s.
	PresenceInterval time.Duration `env:"TURNSTILE_WORKER_PRESENCE_INTERVAL"`
}

// Weights parses TenantWeights.
func (s WorkerSettings) Weights() (map[string]float64, error) {
	out := map[string]float64{}
	for pair := range strings.SplitSeq(s.TenantWeights, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		name, val, ok := strings.Cut(pair, "=")
		w, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if !ok || err != nil || w <= 0 || w > 1000 || strings.TrimSpace(name) == "" {
			return nil, fmt.Errorf("TURNSTILE_TENANT_WEIGHTS: %q is not tenant=weight with a weight above 0 and at most 1000", pair)
		}
		out[strings.TrimSpace(name)] = w
	}
	return out, nil
}

func (s *WorkerSettings) applyDefaults() {
	if s.SessionTimeout == 0 {
		s.SessionTimeout = WorkerSessionTimeoutDefault
	}
	if s.RebalanceTimeout == 0 {
		s.RebalanceTimeout = WorkerRebalanceTimeoutDefault
	}
	if s.RetentionInterval == 0 {
		s.RetentionInterval = RetentionIntervalDefault
	}
	if s.RetentionBatch == 0 {
		s.RetentionBatch = RetentionBatchDefault
	}
	if s.Vacuum == "" {
		s.Vacuum = WorkerVacuumDefault
	}
	if s.ReadAhead == 0 {
		s.ReadAhead = WorkerReadAheadDefault
	}
	if s.Scheduler == "" {
		s.Scheduler = WorkerSchedulerDefault
	}
	if s.QuotaRefresh == 0 {
		s.QuotaRefresh = QuotaRefreshDefault
	}
	if s.UsageMetricTenants == 0 {
		s.UsageMetricTenants = UsageMetricTenantsDefault
	}
	if s.PresenceInterval == 0 {
		s.PresenceInterval = WorkerPresenceIntervalDefault
	}
}

func (s WorkerSettings) validate() []error {
	var errs []error
	checks := []struct {
		bad bool
		msg string
	}{
		{s.SessionTimeout < 100*time.Millisecond, "TURNSTILE_WORKER_SESSION_TIMEOUT: must be at least 100ms"},
		{s.RebalanceTimeout < 100*time.Millisecond, "TURNSTILE_WORKER_REBALANCE_TIMEOUT: must be at least 100ms"},
		{s.RetentionInterval < 10*time.Millisecond, "TURNSTILE_RETENTION_INTERVAL: must be at least 10ms"},
		{s.RetentionBatch < 1 || s.RetentionBatch > 100000, "TURNSTILE_RETENTION_BATCH: must be between 1 and 100000"},
		{s.Vacuum != "auto" && s.Vacuum != "off", "TURNSTILE_WORKER_VACUUM: must be auto or off"},
		{s.ReadAhead < 1 || s.ReadAhead > 10_000_000, "TURNSTILE_WORKER_READ_AHEAD: must be between 1 and 10000000"},
		{s.Scheduler != "fair" && s.Scheduler != "arrival", "TURNSTILE_WORKER_SCHEDULER: must be fair or arrival"},
		{s.QuotaRefresh < 10*time.Millisecond || s.QuotaRefresh > time.Minute, "TURNSTILE_QUOTA_REFRESH: must be between 10ms and 1m"},
		{s.UsageMetricTenants < 1 || s.UsageMetricTenants > 10000, "TURNSTILE_USAGE_METRIC_TENANTS: must be between 1 and 10000"},
		{s.PresenceInterval < 10*time.Millisecond || s.PresenceInterval > time.Minute, "TURNSTILE_WORKER_PRESENCE_INTERVAL: must be between 10ms and 1m"},
	}
	for _, ch := range checks {
		if ch.bad {
			errs = append(errs, errors.New(ch.msg))
		}
	}
	if _, err := s.Weights(); err != nil {
		errs = append(errs, err)
	}
	return errs
}
