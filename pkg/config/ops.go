package config

import (
	"errors"
	"net/url"
	"time"
)

// Ops defaults.
const (
	BacklogIntervalDefault = time.Second
)

// OpsSettings configure the backlog-age signal, metrics and tracing.
// Each field documents its variable and default; applyDefaults fills zero fields and validate
// reports every bound violated.
type OpsSettings struct {
	// BacklogInterval is how often intake recomputes turnstile_backlog_age_seconds from Postgres.
	// TURNSTILE_BACKLOG_INTERVAL, default 1s.
	BacklogInterval time.Duration `env:"TURNSTILE_BACKLOG_INTERVAL"`
	// OTLPEndpoint, when set, exports traces over OTLP/HTTP to this URL
	// (e.g. http://otel-collector:4318). TURNSTILE_OTLP_ENDPOINT, default empty: traces are made
	// (so logs carry trace IDs and context propagates) but not exported.
	OTLPEndpoint string `env:"TURNSTILE_OTLP_ENDPOINT"`
	// TraceSampleRatio is the fraction of new traces sampled (a parent's decision is kept).
	// TURNSTILE_TRACE_SAMPLE_RATIO. Nil means pkg/telemetry's default, which follows export: 1 when
	// OTLPEndpoint is set and 0 when it is not (telemetry.Options.SampleRatio says why).
	// Unsampled spans still carry trace and span IDs, so logs and propagation are the same.
	TraceSampleRatio *float64 `env:"TURNSTILE_TRACE_SAMPLE_RATIO"`
}

func (s *OpsSettings) applyDefaults() {
	if s.BacklogInterval == 0 {
		s.BacklogInterval = BacklogIntervalDefault
	}
}

func (s OpsSettings) validate() []error {
	var errs []error
	if s.BacklogInterval < 10*time.Millisecond {
		errs = append(errs, errors.New("TURNSTILE_BACKLOG_INTERVAL: must be at least 10ms"))
	}
	if s.OTLPEndpoint != "" {
		if u, err := url.Parse(s.OTLPEndpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, errors.New("TURNSTILE_OTLP_ENDPOINT: must be an http:// or https:// URL"))
		}
	}
	if r := s.TraceSampleRatio; r != nil && (*r < 0 || *r > 1) {
		errs = append(errs, errors.New("TURNSTILE_TRACE_SAMPLE_RATIO: must be between 0 and 1"))
	}
	return errs
}
