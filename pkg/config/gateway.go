package config

import (
	"errors"
	"time"
)

// Gateway defaults.
const (
	GatewayMaxConnectionsDefault = 20000
	GatewayMaxPerSessionDefault  = 64
	// GatewayMaxTenantShareDefault lets one tenant fill most of a replica, never all of it.
	GatewayMaxTenantShareDefault = 80
	GatewayRetryDefault          = time.Second
	GatewayOverloadRetryDefault  = 5 * time.Second
	GatewayDrainBatchDefault     = 200
	GatewayDrainIntervalDefault  = 50 * time.Millisecond
	GatewayBufferDefault         = 256
	GatewayWriteTimeoutDefault   = 10 * time.Second
)

// GatewaySettings are the gateway's settings beyond the shared ones (CORS, caps, drain).
// Each field documents its variable and default; applyDefaults fills zero fields and validate
// reports every bound violated. The stream handler's sse.Config defaults to the constants here.
type GatewaySettings struct {
	// CORSOrigins is a comma list of origins allowed to open streams from a browser on another
	// origin ("*" allows any). Defaults to none: same origin only.
	CORSOrigins string `env:"TURNSTILE_GATEWAY_CORS_ORIGINS"`
	// MaxConnections caps the open long-lived streams of one process, every front door's together
	// (pkg/admission): the gateway's event streams and the A2A, AI SDK and LangGraph streams,
	// parked or not. Beyond it the gateway answers a stream inside a 200 with a retry hint, the
	// other doors 503 over-capacity with Retry-After. Defaults to 20000.
	MaxConnections int `env:"TURNSTILE_GATEWAY_MAX_CONNECTIONS"`
	// MaxPerSession caps the open streams of one session in one process, through any door,
	// answered the same way beyond it. Defaults to 64.
	MaxPerSession int `env:"TURNSTILE_GATEWAY_MAX_PER_SESSION"`
	// MaxTenantShare is the percentage of TURNSTILE_GATEWAY_MAX_CONNECTIONS one tenant's streams
	// may hold in one process, through every door together (at least one stream), so one tenant
	// cannot take every slot from the others; beyond it the gateway answers a stream like one over
	// the cap, the other doors 429 tenant-stream-share with Retry-After. It applies with
	// TURNSTILE_AUTH=on, where stream tokens name the tenant. Defaults to 80.
	MaxTenantShare int `env:"TURNSTILE_GATEWAY_MAX_TENANT_SHARE"`
	// Retry is the base of the jittered reconnect delay ("retry:") sent on every stream.
	// Defaults to 1s.
	Retry time.Duration `env:"TURNSTILE_GATEWAY_RETRY"`
	// OverloadRetry is the base of the jittered reconnect delay sent when a cap refuses a stream
	// (the gateway's retry hint, the other doors' Retry-After). Defaults to 5s.
	OverloadRetry time.Duration `env:"TURNSTILE_GATEWAY_OVERLOAD_RETRY"`
	// DrainBatch is how many streams a draining replica closes at once. Defaults to 200.
	DrainBatch int `env:"TURNSTILE_GATEWAY_DRAIN_BATCH"`
	// DrainInterval is the jittered pause between drain batches. Defaults to 50ms.
	DrainInterval time.Duration `env:"TURNSTILE_GATEWAY_DRAIN_INTERVAL"`
	// Buffer is how many entries a stream may fall behind the live tail; a client further behind
	// is closed with a retry hint and resumes from its cursor. Defaults to 256.
	Buffer int `env:"TURNSTILE_GATEWAY_BUFFER"`
	// WriteTimeout bounds one write to a client; a client that does not read for that long is
	// dropped (it resumes from its cursor). Defaults to 10s.
	WriteTimeout time.Duration `env:"TURNSTILE_GATEWAY_WRITE_TIMEOUT"`
}

func (s *GatewaySettings) applyDefaults() {
	if s.MaxConnections == 0 {
		s.MaxConnections = GatewayMaxConnectionsDefault
	}
	if s.MaxPerSession == 0 {
		s.MaxPerSession = GatewayMaxPerSessionDefault
	}
	if s.MaxTenantShare == 0 {
		s.MaxTenantShare = GatewayMaxTenantShareDefault
	}
	if s.Retry == 0 {
		s.Retry = GatewayRetryDefault
	}
	if s.OverloadRetry == 0 {
		s.OverloadRetry = GatewayOverloadRetryDefault
	}
	if s.DrainBatch == 0 {
		s.DrainBatch = GatewayDrainBatchDefault
	}
	if s.DrainInterval == 0 {
		s.DrainInterval = GatewayDrainIntervalDefault
	}
	if s.Buffer == 0 {
		s.Buffer = GatewayBufferDefault
	}
	if s.WriteTimeout == 0 {
		s.WriteTimeout = GatewayWriteTimeoutDefault
	}
}

// CORSOriginList splits CORSOrigins.
func (s GatewaySettings) CORSOriginList() []string { return splitList(s.CORSOrigins) }

func (s GatewaySettings) validate() []error {
	checks := []struct {
		bad bool
		msg string
	}{
		{s.MaxConnections < 1, "TURNSTILE_GATEWAY_MAX_CONNECTIONS: must be at least 1"},
		{s.MaxPerSession < 1, "TURNSTILE_GATEWAY_MAX_PER_SESSION: must be at least 1"},
		{s.MaxTenantShare < 1 || s.MaxTenantShare > 100, "TURNSTILE_GATEWAY_MAX_TENANT_SHARE: must be between 1 and 100"},
		{s.Retry < 10*time.Millisecond, "TURNSTILE_GATEWAY_RETRY: must be at least 10ms"},
		{s.OverloadRetry < 10*time.Millisecond, "TURNSTILE_GATEWAY_OVERLOAD_RETRY: must be at least 10ms"},
		{s.DrainBatch < 1, "TURNSTILE_GATEWAY_DRAIN_BATCH: must be at least 1"},
		{s.DrainInterval < 0, "TURNSTILE_GATEWAY_DRAIN_INTERVAL: must not be negative"},
		{s.Buffer < 8 || s.Buffer > 1<<16, "TURNSTILE_GATEWAY_BUFFER: must be between 8 and 65536"},
		{s.WriteTimeout < 100*time.Millisecond, "TURNSTILE_GATEWAY_WRITE_TIMEOUT: must be at least 100ms"},
	}
	var errs []error
	for _, c := range checks {
		if c.bad {
			errs = append(errs, errors.New(c.msg))
		}
	}
	return errs
}
