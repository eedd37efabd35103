package pool

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/upstream"
)

// Policy is how a pool spreads turns over its endpoints.
type Policy string

// Policies.
const (
	// Affinity sends every request of a session to one endpoint, placed by consistent hashing
	// with bounded loads on the route key: for agents that keep conversation state in memory.
	Affinity Policy = "affinity"
	// LeastRequest sends each request to the less busy of two endpoints drawn at random (power of
	// two choices on requests in flight): for agents whose replicas share their state.
	LeastRequest Policy = "least-request"
)

// Knobs no variable sets. The defaults of the operator's settings are pkg/config's Agent*Default
// constants, which defaults fills in.
const (
	// ProbeTimeoutDefault bounds one probe.
	ProbeTimeoutDefault = 2 * time.Second
	// ProbeFailuresToFail is how many probes in a row an endpoint must fail before it counts as
	// unhealthy; one passing probe makes it healthy again.
	ProbeFailuresToFail = 2
	// virtualNodes is the number of points each endpoint has on the hash ring: enough that the
	// ring itself splits keys within a few percent, before the load bound evens the rest.
	virtualNodes = 160
)

// Config tunes a Pool. Zero fields take their defaults.
type Config struct {
	// Name names the upstream in logs and metrics.
	Name string
	// Policy defaults to Affinity.
	Policy Policy
	// LoadFactor bounds every endpoint's share of the sessions under Affinity to this multiple of
	// the mean. Defaults to 1.25; at least 1.
	LoadFactor float64
	// EjectAfter is how many consecutive failed requests (connect errors, 5xx other than 503,
	// timeouts, streams cut short) eject an endpoint. Defaults to 5.
	EjectAfter int
	// EjectTime is the first ejection's length; each further ejection of the same endpoint lasts
	// one EjectTime longer, and the count decays by one per EjectTime the endpoint stays in.
	// Defaults to 30s.
	EjectTime time.Duration
	// EjectMaxTime caps an ejection. Defaults to 5m.
	EjectMaxTime time.Duration
	// PanicThreshold is the share of the pool that may be unusable (ejected or failing probes):
	// an ejection beyond it is not made, and when more than this share fails its probes the pool
	// routes to every endpoint as if all were healthy. Defaults to 0.5.
	PanicThreshold float64
	// ProbePath, when set, is fetched from every endpoint each ProbeInterval (a path is resolved
	// against the endpoint's URL, so "/healthz" replaces its path); a 2xx answer passes. Empty: no
	// active probes.
	ProbePath string
	// ProbeInterval defaults to 10s.
	ProbeInterval time.Duration
	// ProbeTimeout bounds one probe. Defaults to 2s.
	ProbeTimeout time.Duration
	// ResolveInterval is how often the sources are asked for the endpoints again. Defaults to 30s.
	ResolveInterval time.Duration
	// AffinityIdle is how long a session's placement is kept after its last request. Defaults to
	// 30m.
	AffinityIdle time.Duration
	// Endpoint configures each endpoint's own limit and retry budget (its Limiter and the Retry*
	// fields; the rest is ignored).
	Endpoint upstream.Config
	// Client makes the probes. Defaults to a client without keep-alive reuse across endpoints'
	// lifetimes (a plain http.Client).
	Client *http.Client
	// Log receives ejections, returns, panic and membership changes. Defaults to slog.Default().
	Log *slog.Logger
	// Observer, when set, is told of every request's outcome. It must be safe for concurrent use
	// and fast.
	Observer Observer
}

// Observer learns of every request a pool routed, for per-endpoint latency histograms.
type Observer interface {
	Request(endpoint string, class upstream.Class, err error, latency time.Duration)
}

func (c *Config) defaults() {
	if c.Name == "" {
		c.Name = "upstream"
	}
	if c.Policy == "" {
		c.Policy = Affinity
	}
	if c.LoadFactor < 1 {
		c.LoadFactor = config.AgentLoadFactorDefault
	}
	if c.EjectAfter <= 0 {
		c.EjectAfter = config.AgentEjectFailuresDefault
	}
	if c.EjectTime <= 0 {
		c.EjectTime = config.AgentEjectTimeDefault
	}
	if c.EjectMaxTime <= 0 {
		c.EjectMaxTime = config.AgentEjectMaxTimeDefault
	}
	c.EjectMaxTime = max(c.EjectMaxTime, c.EjectTime)
	if c.PanicThreshold <= 0 || c.PanicThreshold > 1 {
		c.PanicThreshold = float64(config.AgentPanicThresholdDefault) / 100
	}
	if c.ProbeInterval <= 0 {
		c.ProbeInterval = config.AgentProbeIntervalDefault
	}
	if c.ProbeTimeout <= 0 {
		c.ProbeTimeout = ProbeTimeoutDefault
	}
	if c.ResolveInterval <= 0 {
		c.ResolveInterval = config.AgentResolveIntervalDefault
	}
	if c.AffinityIdle <= 0 {
		c.AffinityIdle = config.AgentAffinityIdleDefault
	}
	if c.Client == nil {
		c.Client = &http.Client{}
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
}
