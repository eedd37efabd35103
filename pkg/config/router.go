package config

import (
	"errors"
	"time"
)

// Router defaults.
const (
	RouterConnectTimeoutDefault = time.Second
	RouterProbeIntervalDefault  = 2 * time.Second
	RouterProbeTimeoutDefault   = time.Second
	RouterProbeRiseDefault      = 2
	RouterProbeFallDefault      = 2
	RouterProbePathDefault      = "/readyz"
	RouterRetryAfterDefault     = 5 * time.Second
	RouterIdleConnsDefault      = 256
)

// RouterSettings are the router role's settings: how it reaches the regions of the region map and
// how it learns which are up. The map itself is the regions' shared setting (TURNSTILE_REGIONS_FILE
// or TURNSTILE_REGIONS).
type RouterSettings struct {
	// ConnectTimeout bounds dialling a region (and its TLS handshake); a forward that cannot
	// connect within it marks the region down and is answered 503. Answers have no timeout:
	// streams and long polls are the region's to bound. Defaults to 1s.
	ConnectTimeout time.Duration `env:"TURNSTILE_ROUTER_CONNECT_TIMEOUT"`
	// ProbeInterval is the period of the readiness probes of every region. Defaults to 2s.
	ProbeInterval time.Duration `env:"TURNSTILE_ROUTER_PROBE_INTERVAL"`
	// ProbeTimeout bounds one probe. Defaults to 1s.
	ProbeTimeout time.Duration `env:"TURNSTILE_ROUTER_PROBE_TIMEOUT"`
	// ProbeRise is how many consecutive good probes bring a down region back. Defaults to 2.
	ProbeRise int `env:"TURNSTILE_ROUTER_PROBE_RISE"`
	// ProbeFall is how many consecutive failed probes take an up region down (one failed
	// forward does at once). Defaults to 2.
	ProbeFall int `env:"TURNSTILE_ROUTER_PROBE_FALL"`
	// ProbePath is probed on each region's URL; a 200 is ready. Defaults to /readyz.
	ProbePath string `env:"TURNSTILE_ROUTER_PROBE_PATH"`
	// RetryAfter is the base of the jittered Retry-After of a region-unavailable 503. Defaults
	// to 5s.
	RetryAfter time.Duration `env:"TURNSTILE_ROUTER_RETRY_AFTER"`
	// IdleConns is how many idle keep-alive connections the router keeps to each region.
	// Defaults to 256.
	IdleConns int `env:"TURNSTILE_ROUTER_IDLE_CONNS"`
}

func (s *RouterSettings) applyDefaults() {
	for _, d := range []struct {
		p *time.Duration
		v time.Duration
	}{
		{&s.ConnectTimeout, RouterConnectTimeoutDefault},
		{&s.ProbeInterval, RouterProbeIntervalDefault},
		{&s.ProbeTimeout, RouterProbeTimeoutDefault},
		{&s.RetryAfter, RouterRetryAfterDefault},
	} {
		if *d.p == 0 {
			*d.p = d.v
		}
	}
	for _, d := range []struct {
		p *int
		v int
	}{
		{&s.ProbeRise, RouterProbeRiseDefault},
		{&s.ProbeFall, RouterProbeFallDefault},
		{&s.IdleConns, RouterIdleConnsDefault},
	} {
		if *d.p == 0 {
			*d.p = d.v
		}
	}
	if s.ProbePath == "" {
		s.ProbePath = RouterProbePathDefault
	}
}

func (s RouterSettings) validate() []error {
	checks := []struct {
		bad bool
		msg string
	}{
		{s.ConnectTimeout < time.Millisecond, "TURNSTILE_ROUTER_CONNECT_TIMEOUT: must be at least 1ms"},
		{s.ProbeInterval < 10*time.Millisecond, "TURNSTILE_ROUTER_PROBE_INTERVAL: must be at least 10ms"},
		{s.ProbeTimeout < time.Millisecond, "TURNSTILE_ROUTER_PROBE_TIMEOUT: must be at least 1ms"},
		{s.ProbeRise < 1, "TURNSTILE_ROUTER_PROBE_RISE: must be at least 1"},
		{s.ProbeFall < 1, "TURNSTILE_ROUTER_PROBE_FALL: must be at least 1"},
		{len(s.ProbePath) == 0 || s.ProbePath[0] != '/', "TURNSTILE_ROUTER_PROBE_PATH: must start with /"},
		{s.RetryAfter < time.Second, "TURNSTILE_ROUTER_RETRY_AFTER: must be at least 1s"},
		{s.IdleConns < 1, "TURNSTILE_ROUTER_IDLE_CONNS: must be at least 1"},
	}
	var errs []error
	for _, c := range checks {
		if c.bad {
			errs = append(errs, errors.New(c.msg))
		}
	}
	return errs
}
