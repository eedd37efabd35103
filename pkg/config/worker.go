package config

import (
	"errors"
	"time"
)

// Worker settings defaults.
const (
	WorkerSessionTimeoutDefault   = 10 * time.Second
	WorkerRebalanceTimeoutDefault = 60 * time.Second
	RetentionIntervalDefault      = time.Minute
	RetentionBatchDefault         = 1000
	WorkerVacuumDefault           = "auto"
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
	// Vacuum is "auto" or "off". With auto, while Postgres's autovacuum does not cover the turns
	// and sessions tables (it is off), workers vacuum them when dead rows pass 5% of live rows (at
	// least 5,000; services/worker/internal/vacuum). Defaults to auto.
	Vacuum string `env:"TURNSTILE_WORKER_VACUUM"`
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
	}
	for _, ch := range checks {
		if ch.bad {
			errs = append(errs, errors.New(ch.msg))
		}
	}
	return errs
}
