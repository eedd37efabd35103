package config

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Agent registry defaults (services/intake/internal/registry, pkg/registry/snapshot).
const (
	RegistryLeaseDefault         = 30 * time.Second
	RegistrySweepIntervalDefault = 5 * time.Second
	RegistryExpiryGuardDefault   = 15
	RegistryTombstoneTTLDefault  = time.Hour
	RegistryMaxInflightDefault   = 64
	RegistryRefreshDefault       = 2 * time.Second
	RegistryStaleLimitDefault    = 6 * time.Hour
)

// SnapshotDirOrDefault is SnapshotDir, or turnstile-registry in the temporary directory when it
// is unset (left empty by the defaults, so the configuration's view does not depend on $TMPDIR).
func (s RegistrySettings) SnapshotDirOrDefault() string {
	if s.SnapshotDir != "" {
		return s.SnapshotDir
	}
	return filepath.Join(os.TempDir(), "turnstile-registry")
}

// RegistrySettings configure the agent registry (docs/REGISTRY.md): its write path on intake
// (leases, the sweeper and its mass-expiry guard, admission) and its read path on the workers (the
// snapshot of each agent whose endpoints name "registry"). Each field documents its variable and
// default; applyDefaults fills zero fields and validate reports every bound violated.
type RegistrySettings struct {
	// Lease is how long a registration lasts without a renewal; replicas renew every third of it,
	// jittered. Defaults to 30s.
	Lease time.Duration `env:"TURNSTILE_REGISTRY_LEASE"`
	// SweepInterval is the time between the sweeps that remove expired registrations (one intake
	// replica sweeps at a time). Defaults to 5s.
	SweepInterval time.Duration `env:"TURNSTILE_REGISTRY_SWEEP_INTERVAL"`
	// ExpiryGuard is the percentage of an agent's registrations that may expire in one sweep: when
	// more (and more than one) have, the sweep deletes none of them, freezes them, and raises
	// turnstile_registry_expiry_guard_active. Size it above the fleet's normal churn. Defaults to 15.
	ExpiryGuard int `env:"TURNSTILE_REGISTRY_EXPIRY_GUARD"`
	// TombstoneTTL is how long a removed registration stays readable in the change feed; a reader
	// further behind reloads the whole snapshot. Defaults to 1h.
	TombstoneTTL time.Duration `env:"TURNSTILE_REGISTRY_TOMBSTONE_TTL"`
	// MaxInflight bounds the registry writes one intake serves at once: renewals may use all of
	// it, registrations half, reads a budget of their own of a quarter of it, and the rest is shed
	// at once with 503 and Retry-After. Defaults to 64.
	MaxInflight int `env:"TURNSTILE_REGISTRY_MAX_INFLIGHT"`
	// URL is the registry's base URL as workers reach it (an intake's), for agents whose endpoints
	// name "registry". Defaults to http://127.0.0.1 at TURNSTILE_HTTP_ADDR's port.
	URL string `env:"TURNSTILE_REGISTRY_URL"`
	// APIKey is the admin API key workers read the registry with when TURNSTILE_AUTH=on. Defaults
	// to none.
	APIKey string `env:"TURNSTILE_REGISTRY_API_KEY" secret:"true"`
	// Refresh is how often a worker asks the registry for the changes since its snapshot.
	// Defaults to 2s.
	Refresh time.Duration `env:"TURNSTILE_REGISTRY_REFRESH"`
	// StaleLimit is how old a worker's snapshot may grow while the registry cannot be reached
	// before turns of the agent fail instead of routing from it. Defaults to 6h.
	StaleLimit time.Duration `env:"TURNSTILE_REGISTRY_STALE_LIMIT"`
	// SnapshotDir is where a worker keeps each agent's last good snapshot, read at start when the
	// registry cannot be reached. Defaults to turnstile-registry in the temporary directory.
	SnapshotDir string `env:"TURNSTILE_REGISTRY_SNAPSHOT_DIR"`
}

func (s *RegistrySettings) applyDefaults() {
	dur := func(p *time.Duration, d time.Duration) {
		if *p == 0 {
			*p = d
		}
	}
	dur(&s.Lease, RegistryLeaseDefault)
	dur(&s.SweepInterval, RegistrySweepIntervalDefault)
	dur(&s.TombstoneTTL, RegistryTombstoneTTLDefault)
	dur(&s.Refresh, RegistryRefreshDefault)
	dur(&s.StaleLimit, RegistryStaleLimitDefault)
	if s.ExpiryGuard == 0 {
		s.ExpiryGuard = RegistryExpiryGuardDefault
	}
	if s.MaxInflight == 0 {
		s.MaxInflight = RegistryMaxInflightDefault
	}
}

func (s RegistrySettings) validate() []error {
	checks := []struct {
		bad bool
		msg string
	}{
		{s.Lease < 300*time.Millisecond, "TURNSTILE_REGISTRY_LEASE: must be at least 300ms"},
		{s.SweepInterval < 10*time.Millisecond, "TURNSTILE_REGISTRY_SWEEP_INTERVAL: must be at least 10ms"},
		{s.ExpiryGuard < 1 || s.ExpiryGuard > 100, "TURNSTILE_REGISTRY_EXPIRY_GUARD: must be a percentage from 1 to 100"},
		{s.TombstoneTTL < s.Lease, "TURNSTILE_REGISTRY_TOMBSTONE_TTL: must be at least TURNSTILE_REGISTRY_LEASE"},
		{s.MaxInflight < 2, "TURNSTILE_REGISTRY_MAX_INFLIGHT: must be at least 2"},
		{s.Refresh < 10*time.Millisecond, "TURNSTILE_REGISTRY_REFRESH: must be at least 10ms"},
		{s.StaleLimit < s.Refresh, "TURNSTILE_REGISTRY_STALE_LIMIT: must be at least TURNSTILE_REGISTRY_REFRESH"},
	}
	var errs []error
	for _, c := range checks {
		if c.bad {
			errs = append(errs, errors.New(c.msg))
		}
	}
	return errs
}

// RegistryURL is TURNSTILE_REGISTRY_URL, or this process's own HTTP port on the loopback address
// when it is unset (every role in one process, as make dev runs it).
func (c Config) RegistryURL() string {
	if c.Registry.URL != "" {
		return c.Registry.URL
	}
	_, port, err := net.SplitHostPort(c.HTTPAddr)
	if err != nil || port == "" || port == "0" {
		port = "8080"
	}
	return "http://" + net.JoinHostPort("127.0.0.1", port)
}
