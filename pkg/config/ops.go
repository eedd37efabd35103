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
	// BacklogInterval is how often intake recomputes the backlog age
	// (turnstile_backlog_age_seconds, GET /v1/backlog) from Postgres. Defaults to 1s.
	BacklogInterval time.Duration `env:"TURNSTILE_BACKLOG_INTERVAL"`
	// OTLPEndpoint is the URL of an OTLP/HTTP trace collector (e.g. http://otel-collector:4318)
	// that traces are exported to. Defaults to none: traces are made (so logs carry trace IDs
	// and context propagates) but not exported.
	OTLPEndpoint string `env:"TURNSTILE_OTLP_ENDPOINT"`
	// TraceSampleRatio is the fraction of new traces sampled (a caller's decision is kept).
	// Without an exporter nothing would read a sampled span, so none is recorded unless this is
	// set; unsampled spans still carry trace and span IDs. Unset, the field is nil and
	// pkg/telemetry chooses (telemetry.Options.SampleRatio). Defaults to 1 with
	// TURNSTILE_OTLP_ENDPOINT, 0 without.
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
