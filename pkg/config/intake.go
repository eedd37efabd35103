package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Intake defaults.
const (
	MaxBacklogAgeDefault      = 2 * time.Minute
	TenantRateDefault         = 200
	MaxQueuedTurnsDefault     = 10000
	IdempotencyTTLDefault     = 24 * time.Hour
	QueueFlushIntervalDefault = 5 * time.Millisecond
	RetryAfterDefault         = 2 * time.Second
	RedriveIntervalDefault    = 5 * time.Second
	PushConfigsMaxDefault     = 10
	AdminJobLeaseDefault      = 10 * time.Second
)

// IntakeSettings are intake's settings beyond the shared ones (admission control, quotas, API).
// Each field documents its variable and default; applyDefaults fills zero fields and validate
// reports every bound violated. The handler's limits no variable sets (store timeouts, cache TTLs,
// page sizes) are documented defaults of intake's api.Config, whose other fields default to the
// constants here.
type IntakeSettings struct {
	// MaxBacklogAge is the backlog age (how long the oldest turn that could start has waited)
	// past which intake answers 503 instead of queueing more. Defaults to 2m.
	MaxBacklogAge time.Duration `env:"TURNSTILE_MAX_BACKLOG_AGE"`
	// TenantRate is each tenant's sustained rate of accepted turns per second, shared by every
	// intake replica through Redis (GCRA). Defaults to 200.
	TenantRate int `env:"TURNSTILE_TENANT_RATE"`
	// TenantBurst is how many turns a tenant may post at once above its rate. Defaults to twice
	// TURNSTILE_TENANT_RATE.
	TenantBurst int `env:"TURNSTILE_TENANT_BURST"`
	// MaxQueuedTurns is how many queued (not yet started) turns a tenant may have before intake
	// answers 429. Defaults to 10000.
	MaxQueuedTurns int `env:"TURNSTILE_MAX_QUEUED_TURNS"`
	// IdempotencyTTL is how long intake remembers an Idempotency-Key's body, to answer 422 to
	// the same key with another body. Defaults to 24h.
	IdempotencyTTL time.Duration `env:"TURNSTILE_IDEMPOTENCY_TTL"`
	// QueueFlushInterval is how often intake writes the queued rows of accepted turns to
	// Postgres, in one statement. Defaults to 5ms.
	QueueFlushInterval time.Duration `env:"TURNSTILE_QUEUE_FLUSH_INTERVAL"`
	// RetryAfter is the base of the Retry-After intake sends with a 503; each answer jitters it
	// over [RetryAfter/2, 3·RetryAfter/2). Defaults to 2s.
	RetryAfter time.Duration `env:"TURNSTILE_RETRY_AFTER"`
	// RedriveInterval is how often intake's re-driver looks for accepted turns whose Kafka record
	// was lost (and produces them again from Postgres) and for queued turns past their deadline
	// (and ends them). Defaults to 5s.
	RedriveInterval time.Duration `env:"TURNSTILE_REDRIVE_INTERVAL"`
	// AdminJobLease is how long an intake holds a bulk admin job (a cancel or replay by filter)
	// without renewing it: a job whose intake died is resumed by another (or the restarted one)
	// this long after, each of its items still acted on once. It is renewed at every batch of
	// items and looked for at a third of it. Defaults to 10s.
	AdminJobLease time.Duration `env:"TURNSTILE_ADMIN_JOB_LEASE"`
	// AdminURL is the base URL of the admin API the CLI commands (`turnstile turns|jobs|workers|
	// dlq|audit`) speak to. Defaults to this process's TURNSTILE_HTTP_ADDR on 127.0.0.1.
	AdminURL string `env:"TURNSTILE_ADMIN_URL"`
	// APIKey is the API key the CLI commands send (an admin key sees every tenant); their --key
	// flag overrides it. Secret. Defaults to none (enough with TURNSTILE_AUTH=off).
	APIKey string `env:"TURNSTILE_API_KEY" secret:"true"`
	// PushConfigsMax is the most push-notification configs one task may have, however they come
	// (the native PUT, A2A's tasks/pushNotificationConfig/set, a config sent with a message). A
	// trigger on task_push_configs holds it in Postgres for every writer: a PUT or set beyond it
	// is refused (409 push-configs-limit, A2A invalid params), a config sent with a message to a
	// full task is not stored. Every process that writes turns reads it. Defaults to 10.
	PushConfigsMax int `env:"TURNSTILE_PUSH_CONFIGS_MAX"`
	// ModelPrices are the prices of models' tokens, as model=input/output pairs separated by
	// commas, each a price per 1,000 tokens (gpt-x=0.5/1.5): GET /v1/admin/usage reports each
	// usage row of a priced model with its cost. Defaults to none (no costs).
	ModelPrices string `env:"TURNSTILE_MODEL_PRICES"`
}

// Price is a model's price per 1,000 input and output tokens.
type Price struct{ Input, Output float64 }

// Prices parses ModelPrices.
func (s IntakeSettings) Prices() (map[string]Price, error) {
	out := map[string]Price{}
	for pair := range strings.SplitSeq(s.ModelPrices, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		name, val, ok := strings.Cut(pair, "=")
		in, outp, ok2 := strings.Cut(val, "/")
		pi, err1 := strconv.ParseFloat(strings.TrimSpace(in), 64)
		po, err2 := strconv.ParseFloat(strings.TrimSpace(outp), 64)
		if !ok || !ok2 || err1 != nil || err2 != nil || pi < 0 || po < 0 || strings.TrimSpace(name) == "" {
			return nil, fmt.Errorf("TURNSTILE_MODEL_PRICES: %q is not model=input/output with prices per 1,000 tokens of at least 0", pair)
		}
		out[strings.TrimSpace(name)] = Price{Input: pi, Output: po}
	}
	return out, nil
}

func (s *IntakeSettings) applyDefaults() {
	if s.MaxBacklogAge == 0 {
		s.MaxBacklogAge = MaxBacklogAgeDefault
	}
	if s.TenantRate == 0 {
		s.TenantRate = TenantRateDefault
	}
	if s.TenantBurst == 0 {
		s.TenantBurst = 2 * s.TenantRate
	}
	if s.MaxQueuedTurns == 0 {
		s.MaxQueuedTurns = MaxQueuedTurnsDefault
	}
	if s.IdempotencyTTL == 0 {
		s.IdempotencyTTL = IdempotencyTTLDefault
	}
	if s.QueueFlushInterval == 0 {
		s.QueueFlushInterval = QueueFlushIntervalDefault
	}
	if s.RetryAfter == 0 {
		s.RetryAfter = RetryAfterDefault
	}
	if s.RedriveInterval == 0 {
		s.RedriveInterval = RedriveIntervalDefault
	}
	if s.AdminJobLease == 0 {
		s.AdminJobLease = AdminJobLeaseDefault
	}
	if s.PushConfigsMax == 0 {
		s.PushConfigsMax = PushConfigsMaxDefault
	}
}

func (s IntakeSettings) validate() []error {
	checks := []struct {
		bad bool
		msg string
	}{
		{s.MaxBacklogAge < time.Second, "TURNSTILE_MAX_BACKLOG_AGE: must be at least 1s"},
		{s.TenantRate < 1, "TURNSTILE_TENANT_RATE: must be at least 1"},
		{s.TenantBurst < 1, "TURNSTILE_TENANT_BURST: must be at least 1"},
		{s.MaxQueuedTurns < 1, "TURNSTILE_MAX_QUEUED_TURNS: must be at least 1"},
		{s.IdempotencyTTL < time.Minute, "TURNSTILE_IDEMPOTENCY_TTL: must be at least 1m"},
		{s.QueueFlushInterval < time.Millisecond || s.QueueFlushInterval > time.Second, "TURNSTILE_QUEUE_FLUSH_INTERVAL: must be between 1ms and 1s"},
		{s.RetryAfter < time.Second, "TURNSTILE_RETRY_AFTER: must be at least 1s"},
		{s.RedriveInterval < 10*time.Millisecond || s.RedriveInterval > 10*time.Minute, "TURNSTILE_REDRIVE_INTERVAL: must be between 10ms and 10m"},
		{s.AdminJobLease < 300*time.Millisecond || s.AdminJobLease > 10*time.Minute, "TURNSTILE_ADMIN_JOB_LEASE: must be between 300ms and 10m"},
		{s.PushConfigsMax < 1 || s.PushConfigsMax > 1000, "TURNSTILE_PUSH_CONFIGS_MAX: must be between 1 and 1000"},
	}
	var errs []error
	for _, c := range checks {
		if c.bad {
			errs = append(errs, errors.New(c.msg))
		}
	}
	if _, err := s.Prices(); err != nil {
		errs = append(errs, err)
	}
	return errs
}
