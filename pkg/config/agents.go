package config

import (
	"errors"
	"time"
)

// Agent adapter and upstream protection defaults.
const (
	UpstreamInitialLimitDefault  = 16
	UpstreamMaxLimitDefault      = 256
	UpstreamLatencyTargetDefault = 5 * time.Second
	UpstreamRetryRatioDefault    = 0.2
	UpstreamRetryReserveDefault  = 10
	AgentHeaderTimeoutDefault    = 60 * time.Second
	HTTPAgentIdleTimeoutDefault  = 60 * time.Second
	HTTPAgentMaxBytesDefault     = 16 << 20
	HistoryCacheSessionsDefault  = 4096
	UpstreamTotalLimitDefault    = 1024

	AgentPolicyDefault          = "affinity"
	AgentLoadFactorDefault      = 1.25
	AgentEjectFailuresDefault   = 5
	AgentEjectTimeDefault       = 30 * time.Second
	AgentEjectMaxTimeDefault    = 5 * time.Minute
	AgentPanicThresholdDefault  = 50
	AgentProbeIntervalDefault   = 10 * time.Second
	AgentResolveIntervalDefault = 30 * time.Second
	AgentAffinityIdleDefault    = 30 * time.Minute
)

// AgentSettings configure the agent adapters and upstream protection.
// Each field documents its variable and default; applyDefaults fills zero fields and validate
// reports every bound violated. Which adapter runs is TURNSTILE_AGENT (demo, openai, http, a2a); the
// adapter checks its own required settings when the worker starts.
type AgentSettings struct {
	// OpenAIBaseURL is the root of an OpenAI-compatible API (…/v1, e.g.
	// http://127.0.0.1:11434/v1), for TURNSTILE_AGENT=openai; required unless
	// TURNSTILE_AGENT_ENDPOINTS names the replicas. Defaults to none.
	OpenAIBaseURL string `env:"TURNSTILE_OPENAI_BASE_URL"`
	// OpenAIAPIKey is the bearer token sent to the OpenAI-compatible API, when it needs one.
	// Defaults to none.
	OpenAIAPIKey string `env:"TURNSTILE_OPENAI_API_KEY" secret:"true"`
	// OpenAIModel is the model name, required for TURNSTILE_AGENT=openai. Defaults to none.
	OpenAIModel string `env:"TURNSTILE_OPENAI_MODEL"`
	// OpenAISystem is the system prompt of every conversation of the openai adapter. Defaults to
	// none.
	OpenAISystem string `env:"TURNSTILE_OPENAI_SYSTEM"`

	// HTTPAgentURL is where the http adapter posts turns; required for TURNSTILE_AGENT=http
	// unless TURNSTILE_AGENT_ENDPOINTS names the replicas. Defaults to none.
	HTTPAgentURL string `env:"TURNSTILE_HTTP_AGENT_URL"`
	// HTTPAgentAuthorization is the Authorization header value the http adapter sends with every
	// turn. Defaults to none.
	HTTPAgentAuthorization string `env:"TURNSTILE_HTTP_AGENT_AUTHORIZATION" secret:"true"`
	// HTTPAgentIdleTimeout bounds the silence between two events of an http agent's answer.
	// Defaults to 60s.
	HTTPAgentIdleTimeout time.Duration `env:"TURNSTILE_HTTP_AGENT_IDLE_TIMEOUT"`
	// HTTPAgentMaxBytes bounds one answer of the http agent, in bytes. Defaults to 16777216
	// (16 MiB).
	HTTPAgentMaxBytes int64 `env:"TURNSTILE_HTTP_AGENT_MAX_BYTES"`

	// A2AURL is the remote A2A agent's JSON-RPC endpoint; required for TURNSTILE_AGENT=a2a
	// unless TURNSTILE_AGENT_ENDPOINTS names the replicas. Defaults to none.
	A2AURL string `env:"TURNSTILE_A2A_URL"`

	// HeaderTimeout bounds the wait for an upstream's answer headers (openai, http, a2a).
	// Defaults to 60s.
	HeaderTimeout time.Duration `env:"TURNSTILE_AGENT_HEADER_TIMEOUT"`

	// HistoryCacheSessions bounds the sessions whose history a worker keeps in memory; 0 keeps
	// none. Defaults to 4096.
	HistoryCacheSessions int `env:"TURNSTILE_HISTORY_CACHE_SESSIONS"`

	// # Upstream guard and pools
	//
	// Every call of the openai, http and a2a adapters goes through an adaptive concurrency limit
	// and a retry budget per endpoint, within a total for the agent, to a pool of the agent's
	// replicas (README, "Upstream pools").

	// UpstreamInitialLimit is the starting value of each endpoint's adaptive concurrency limit.
	// Defaults to 16.
	UpstreamInitialLimit int `env:"TURNSTILE_UPSTREAM_INITIAL_LIMIT"`
	// UpstreamMaxLimit is the ceiling of each endpoint's adaptive concurrency limit. Defaults to
	// 256.
	UpstreamMaxLimit int `env:"TURNSTILE_UPSTREAM_MAX_LIMIT"`
	// UpstreamTotalLimit bounds the calls in flight to all the agent's endpoints together; each
	// endpoint has its own adaptive limit within it. Defaults to 1024.
	UpstreamTotalLimit int `env:"TURNSTILE_UPSTREAM_TOTAL_LIMIT"`
	// UpstreamLatencyTarget is the answer time within which an endpoint's limit grows; slower
	// answers do not grow it. Defaults to 5s.
	UpstreamLatencyTarget time.Duration `env:"TURNSTILE_UPSTREAM_LATENCY_TARGET"`
	// UpstreamRetryRatio is the share of first attempts that retries may add, for the agent's
	// total and for each endpoint. Defaults to 0.2.
	UpstreamRetryRatio float64 `env:"TURNSTILE_UPSTREAM_RETRY_RATIO"`
	// UpstreamRetryReserve is the burst of retries allowed beyond the ratio (it refills at one a
	// second); size it to the turns in flight on one replica, which retry together when it dies.
	// Defaults to 10.
	UpstreamRetryReserve int `env:"TURNSTILE_UPSTREAM_RETRY_RESERVE"`

	// AgentEndpoints lists the agent's replicas, a comma list of URLs: "dns+<URL>" is a DNS name
	// whose every address is a replica, re-resolved every TURNSTILE_AGENT_RESOLVE_INTERVAL; for
	// a2a, "card+<URL>" is a replica's Agent Card. It replaces the adapter's single URL
	// (TURNSTILE_OPENAI_BASE_URL, TURNSTILE_HTTP_AGENT_URL, TURNSTILE_A2A_URL). Defaults to the
	// adapter's URL, a pool of one.
	AgentEndpoints string `env:"TURNSTILE_AGENT_ENDPOINTS"`
	// AgentPolicy is "affinity" (a session's requests reach one replica, for agents that keep a
	// conversation in memory) or "least-request" (for replicas that share their state). Defaults
	// to affinity.
	AgentPolicy string `env:"TURNSTILE_AGENT_POLICY"`
	// AgentLoadFactor bounds a replica's sessions under affinity to this multiple of the mean.
	// Defaults to 1.25.
	AgentLoadFactor float64 `env:"TURNSTILE_AGENT_LOAD_FACTOR"`
	// AgentEjectFailures is how many consecutive failed requests (connect errors, timeouts, cut
	// streams, 5xx but 503) eject a replica. Defaults to 5.
	AgentEjectFailures int `env:"TURNSTILE_AGENT_EJECT_FAILURES"`
	// AgentEjectTime is the first ejection's length; each further one lasts one more, and the
	// count decays by one per this time back in. Defaults to 30s.
	AgentEjectTime time.Duration `env:"TURNSTILE_AGENT_EJECT_TIME"`
	// AgentEjectMaxTime caps an ejection. Defaults to 5m.
	AgentEjectMaxTime time.Duration `env:"TURNSTILE_AGENT_EJECT_MAX_TIME"`
	// AgentPanicThreshold is the percentage of replicas that may be unusable: no ejection goes
	// beyond it, and while more fail their probes every replica gets traffic. Defaults to 50.
	AgentPanicThreshold int `env:"TURNSTILE_AGENT_PANIC_THRESHOLD"`
	// AgentProbePath is fetched from every replica each TURNSTILE_AGENT_PROBE_INTERVAL (resolved
	// against the replica's URL); "off" disables probes. Defaults to the Agent Card for a2a, off
	// for the other adapters.
	AgentProbePath string `env:"TURNSTILE_AGENT_PROBE_PATH"`
	// AgentProbeInterval is the probes' period. Defaults to 10s.
	AgentProbeInterval time.Duration `env:"TURNSTILE_AGENT_PROBE_INTERVAL"`
	// AgentResolveInterval is how often DNS names and Agent Cards of TURNSTILE_AGENT_ENDPOINTS are
	// read again. Defaults to 30s.
	AgentResolveInterval time.Duration `env:"TURNSTILE_AGENT_RESOLVE_INTERVAL"`
	// AgentAffinityIdle is how long a session's placement is kept after its last request.
	// Defaults to 30m.
	AgentAffinityIdle time.Duration `env:"TURNSTILE_AGENT_AFFINITY_IDLE"`
}

func (s *AgentSettings) applyDefaults() {
	if s.HTTPAgentIdleTimeout == 0 {
		s.HTTPAgentIdleTimeout = HTTPAgentIdleTimeoutDefault
	}
	if s.HTTPAgentMaxBytes == 0 {
		s.HTTPAgentMaxBytes = HTTPAgentMaxBytesDefault
	}
	if s.HeaderTimeout == 0 {
		s.HeaderTimeout = AgentHeaderTimeoutDefault
	}
	if s.UpstreamInitialLimit == 0 {
		s.UpstreamInitialLimit = UpstreamInitialLimitDefault
	}
	if s.UpstreamMaxLimit == 0 {
		s.UpstreamMaxLimit = UpstreamMaxLimitDefault
	}
	if s.UpstreamLatencyTarget == 0 {
		s.UpstreamLatencyTarget = UpstreamLatencyTargetDefault
	}
	if s.UpstreamRetryRatio == 0 {
		s.UpstreamRetryRatio = UpstreamRetryRatioDefault
	}
	if s.UpstreamRetryReserve == 0 {
		s.UpstreamRetryReserve = UpstreamRetryReserveDefault
	}
	if s.HistoryCacheSessions == 0 {
		s.HistoryCacheSessions = HistoryCacheSessionsDefault
	}
	if s.UpstreamTotalLimit == 0 {
		s.UpstreamTotalLimit = UpstreamTotalLimitDefault
	}
	if s.AgentPolicy == "" {
		s.AgentPolicy = AgentPolicyDefault
	}
	if s.AgentLoadFactor == 0 {
		s.AgentLoadFactor = AgentLoadFactorDefault
	}
	if s.AgentEjectFailures == 0 {
		s.AgentEjectFailures = AgentEjectFailuresDefault
	}
	if s.AgentEjectTime == 0 {
		s.AgentEjectTime = AgentEjectTimeDefault
	}
	if s.AgentEjectMaxTime == 0 {
		s.AgentEjectMaxTime = AgentEjectMaxTimeDefault
	}
	if s.AgentPanicThreshold == 0 {
		s.AgentPanicThreshold = AgentPanicThresholdDefault
	}
	if s.AgentProbeInterval == 0 {
		s.AgentProbeInterval = AgentProbeIntervalDefault
	}
	if s.AgentResolveInterval == 0 {
		s.AgentResolveInterval = AgentResolveIntervalDefault
	}
	if s.AgentAffinityIdle == 0 {
		s.AgentAffinityIdle = AgentAffinityIdleDefault
	}
}

// AgentEndpointList splits AgentEndpoints.
func (s AgentSettings) AgentEndpointList() []string { return splitList(s.AgentEndpoints) }

func (s AgentSettings) validate() []error {
	checks := []struct {
		bad bool
		msg string
	}{
		{s.HTTPAgentIdleTimeout < 0, "TURNSTILE_HTTP_AGENT_IDLE_TIMEOUT: must not be negative"},
		{s.HTTPAgentMaxBytes < 1024, "TURNSTILE_HTTP_AGENT_MAX_BYTES: must be at least 1024"},
		{s.HeaderTimeout < 0, "TURNSTILE_AGENT_HEADER_TIMEOUT: must not be negative"},
		{s.UpstreamInitialLimit < 1, "TURNSTILE_UPSTREAM_INITIAL_LIMIT: must be at least 1"},
		{s.UpstreamMaxLimit < s.UpstreamInitialLimit, "TURNSTILE_UPSTREAM_MAX_LIMIT: must be at least TURNSTILE_UPSTREAM_INITIAL_LIMIT"},
		{s.UpstreamLatencyTarget < 0, "TURNSTILE_UPSTREAM_LATENCY_TARGET: must not be negative"},
		{s.UpstreamRetryRatio < 0 || s.UpstreamRetryRatio > 1, "TURNSTILE_UPSTREAM_RETRY_RATIO: must be between 0 and 1"},
		{s.UpstreamRetryReserve < 0, "TURNSTILE_UPSTREAM_RETRY_RESERVE: must not be negative"},
		{s.HistoryCacheSessions < 0, "TURNSTILE_HISTORY_CACHE_SESSIONS: must not be negative"},
		{s.UpstreamTotalLimit < 1, "TURNSTILE_UPSTREAM_TOTAL_LIMIT: must be at least 1"},
		{s.AgentPolicy != "affinity" && s.AgentPolicy != "least-request", "TURNSTILE_AGENT_POLICY: must be affinity or least-request"},
		{s.AgentLoadFactor < 1, "TURNSTILE_AGENT_LOAD_FACTOR: must be at least 1"},
		{s.AgentEjectFailures < 1, "TURNSTILE_AGENT_EJECT_FAILURES: must be at least 1"},
		{s.AgentEjectTime < 0, "TURNSTILE_AGENT_EJECT_TIME: must not be negative"},
		{s.AgentEjectMaxTime < s.AgentEjectTime, "TURNSTILE_AGENT_EJECT_MAX_TIME: must be at least TURNSTILE_AGENT_EJECT_TIME"},
		{s.AgentPanicThreshold < 1 || s.AgentPanicThreshold > 100, "TURNSTILE_AGENT_PANIC_THRESHOLD: must be between 1 and 100"},
		{s.AgentProbeInterval < 0, "TURNSTILE_AGENT_PROBE_INTERVAL: must not be negative"},
		{s.AgentResolveInterval < 0, "TURNSTILE_AGENT_RESOLVE_INTERVAL: must not be negative"},
		{s.AgentAffinityIdle < 0, "TURNSTILE_AGENT_AFFINITY_IDLE: must not be negative"},
	}
	var errs []error
	for _, c := range checks {
		if c.bad {
			errs = append(errs, errors.New(c.msg))
		}
	}
	return errs
}
