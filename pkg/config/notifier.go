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
	// Batch is the most notifications in flight per notifier, and the most outbox rows one claim
	// takes. Defaults to 64.
	Batch int `env:"TURNSTILE_NOTIFIER_BATCH"`
	// Poll is how often an idle notifier looks for due notifications. Defaults to 100ms.
	Poll time.Duration `env:"TURNSTILE_NOTIFIER_POLL"`
	// Lease is how long a claimed notification is the claimant's, more than
	// TURNSTILE_NOTIFIER_TIMEOUT; a dead notifier's rows move on after it. Defaults to 30s.
	Lease time.Duration `env:"TURNSTILE_NOTIFIER_LEASE"`
	// Timeout bounds one POST to a webhook, its answer included. Defaults to 10s.
	Timeout time.Duration `env:"TURNSTILE_NOTIFIER_TIMEOUT"`
	// MaxAttempts is how many attempts a notification gets before it is dead-lettered with its
	// last error. Defaults to 12.
	MaxAttempts int `env:"TURNSTILE_NOTIFIER_MAX_ATTEMPTS"`
	// MaxAge is the age after which a notification is dead-lettered instead of retried. Defaults
	// to 24h.
	MaxAge time.Duration `env:"TURNSTILE_NOTIFIER_MAX_AGE"`
	// BackoffBase shapes the retry delay: uniform over [0, base·2^(attempts-1)] (full jitter),
	// and at least the receiver's Retry-After. Defaults to 1s.
	BackoffBase time.Duration `env:"TURNSTILE_NOTIFIER_BACKOFF_BASE"`
	// BackoffMax caps the retry delay. Defaults to 10m.
	BackoffMax time.Duration `env:"TURNSTILE_NOTIFIER_BACKOFF_MAX"`
	// PerDestination is the most POSTs in flight to one destination (scheme://host:port) per
	// notifier. Defaults to 4.
	PerDestination int `env:"TURNSTILE_NOTIFIER_PER_DESTINATION"`
	// SigningSecret is the Standard Webhooks secret ("whsec_" and base64) every delivery is
	// signed with. Set your own in production; the Helm chart puts a random one in its Secret at
	// install and keeps it on upgrade. Defaults to a published development secret.
	SigningSecret string `env:"TURNSTILE_NOTIFIER_SIGNING_SECRET" secret:"true"`
	// AllowNetworks is a comma list of CIDRs webhooks may reach although they are not public
	// (loopback, private, link-local). Defaults to none: public addresses only.
	AllowNetworks string `env:"TURNSTILE_NOTIFIER_ALLOW_NETWORKS"`
	// AllowHTTP lets webhooks use http:// instead of https://; intake reads it too, when it
	// checks a turn's webhook. Defaults to false.
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
