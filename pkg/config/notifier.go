package config

import (
	"encoding/base64"
	"errors"
	"net/netip"
	"strings"
	"time"
)

// Notifier defaults.
const (
	NotifierBatchDefault          = 64
	NotifierPollDefault           = 100 * time.Millisecond
	NotifierLeaseDefault          = 30 * time.Second
	NotifierTimeoutDefault        = 10 * time.Second
	NotifierMaxAttemptsDefault    = 12
	NotifierMaxAgeDefault         = 24 * time.Hour
	NotifierBackoffBaseDefault    = time.Second
	NotifierBackoffMaxDefault     = 10 * time.Minute
	NotifierPerDestinationDefault = 4
	NotifierBreakerFailures       = 5
	// NotifierSigningSecretDefault is a development secret ("whsec_" and base64 of
	// "turnstile-dev-signing-secret"): every production deployment sets its own.
	NotifierSigningSecretDefault = "whsec_dHVybnN0aWxlLWRldi1zaWduaW5nLXNlY3JldA==" //nolint:gosec // the published development secret, like the dev stream-token key
)

// NotifierSettings are the notifier role's settings: how it claims outbox rows, how it retries, and
// which destinations it may reach.
type NotifierSettings struct {
	// Batch is the most outbox rows one claim takes. TURNSTILE_NOTIFIER_BATCH, default 64.
	Batch int `env:"TURNSTILE_NOTIFIER_BATCH"`
	// Poll is how often an idle notifier looks for due rows. TURNSTILE_NOTIFIER_POLL, default 100ms.
	Poll time.Duration `env:"TURNSTILE_NOTIFIER_POLL"`
	// Lease is how long a claimed row is the claimant's; a notifier that dies loses its rows to
	// another after it. TURNSTILE_NOTIFIER_LEASE, default 30s (it must exceed Timeout).
	Lease time.Duration `env:"TURNSTILE_NOTIFIER_LEASE"`
	// Timeout bounds one POST to a webhook. TURNSTILE_NOTIFIER_TIMEOUT, default 10s.
	Timeout time.Duration `env:"TURNSTILE_NOTIFIER_TIMEOUT"`
	// MaxAttempts and MaxAge bound the retries of one notification; after either it is
	// dead-lettered with its last error. TURNSTILE_NOTIFIER_MAX_ATTEMPTS (default 12),
	// TURNSTILE_NOTIFIER_MAX_AGE (default 24h).
	MaxAttempts int           `env:"TURNSTILE_NOTIFIER_MAX_ATTEMPTS"`
	MaxAge      time.Duration `env:"TURNSTILE_NOTIFIER_MAX_AGE"`
	// BackoffBase and BackoffMax shape the retry delay: full jitter over base·2^attempt, capped.
	// TURNSTILE_NOTIFIER_BACKOFF_BASE (default 1s), TURNSTILE_NOTIFIER_BACKOFF_MAX (default 10m).
	BackoffBase time.Duration `env:"TURNSTILE_NOTIFIER_BACKOFF_BASE"`
	BackoffMax  time.Duration `env:"TURNSTILE_NOTIFIER_BACKOFF_MAX"`
	// PerDestination is the most POSTs in flight to one destination (scheme://host:port).
	// TURNSTILE_NOTIFIER_PER_DESTINATION, default 4.
	PerDestination int `env:"TURNSTILE_NOTIFIER_PER_DESTINATION"`
	// SigningSecret is the Standard Webhooks secret ("whsec_" + base64) every delivery is signed
	// with. TURNSTILE_NOTIFIER_SIGNING_SECRET, default a development secret.
	SigningSecret string `env:"TURNSTILE_NOTIFIER_SIGNING_SECRET"`
	// AllowNetworks is a comma list of CIDRs webhooks may reach although they are not public
	// (loopback, private, link-local). TURNSTILE_NOTIFIER_ALLOW_NETWORKS, default none.
	AllowNetworks string `env:"TURNSTILE_NOTIFIER_ALLOW_NETWORKS"`
	// AllowHTTP lets webhooks use http:// instead of https://. TURNSTILE_NOTIFIER_ALLOW_HTTP, default false.
	AllowHTTP bool `env:"TURNSTILE_NOTIFIER_ALLOW_HTTP"`
}

func (s *NotifierSettings) applyDefaults() {
	if s.Batch == 0 {
		s.Batch = NotifierBatchDefault
	}
	if s.MaxAttempts == 0 {
		s.MaxAttempts = NotifierMaxAttemptsDefault
	}
	if s.PerDestination == 0 {
		s.PerDestination = NotifierPerDestinationDefault
	}
	for _, d := range []struct {
		p *time.Duration
		v time.Duration
	}{
		{&s.Poll, NotifierPollDefault},
		{&s.Lease, NotifierLeaseDefault},
		{&s.Timeout, NotifierTimeoutDefault},
		{&s.MaxAge, NotifierMaxAgeDefault},
		{&s.BackoffBase, NotifierBackoffBaseDefault},
		{&s.BackoffMax, NotifierBackoffMaxDefault},
	} {
		if *d.p == 0 {
			*d.p = d.v
		}
	}
	if s.SigningSecret == "" {
		s.SigningSecret = NotifierSigningSecretDefault
	}
}

// AllowedNetworks parses AllowNetworks; entries that are not CIDRs are left out (validate reports them).
func (s NotifierSettings) AllowedNetworks() []netip.Prefix {
	var out []netip.Prefix
	for _, e := range splitList(s.AllowNetworks) {
		if p, err := netip.ParsePrefix(e); err == nil {
			out = append(out, p.Masked())
		}
	}
	return out
}

func (s NotifierSettings) validate() []error {
	_, secretErr := base64.StdEncoding.DecodeString(strings.TrimPrefix(s.SigningSecret, "whsec_"))
	checks := []struct {
		bad bool
		msg string
	}{
		{s.Batch < 1 || s.Batch > 1000, "TURNSTILE_NOTIFIER_BATCH: must be between 1 and 1000"},
		{s.MaxAttempts < 1, "TURNSTILE_NOTIFIER_MAX_ATTEMPTS: must be at least 1"},
		{s.PerDestination < 1, "TURNSTILE_NOTIFIER_PER_DESTINATION: must be at least 1"},
		{s.Poll < time.Millisecond, "TURNSTILE_NOTIFIER_POLL: must be at least 1ms"},
		{s.Lease <= s.Timeout, "TURNSTILE_NOTIFIER_LEASE: must exceed TURNSTILE_NOTIFIER_TIMEOUT"},
		{s.BackoffMax < s.BackoffBase, "TURNSTILE_NOTIFIER_BACKOFF_MAX: must be at least TURNSTILE_NOTIFIER_BACKOFF_BASE"},
		{secretErr != nil, "TURNSTILE_NOTIFIER_SIGNING_SECRET: must be whsec_ followed by base64"},
		{len(s.AllowedNetworks()) != len(splitList(s.AllowNetworks)), "TURNSTILE_NOTIFIER_ALLOW_NETWORKS: must be a comma list of CIDRs"},
	}
	var errs []error
	for _, c := range checks {
		if c.bad {
			errs = append(errs, errors.New(c.msg))
		}
	}
	return errs
}
