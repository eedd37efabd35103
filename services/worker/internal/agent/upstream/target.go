package upstream

import (
	"context"
	"net/http"
	"time"

	"github.com/turnstile-run/turnstile/services/worker/internal/agent"
)

// Target is where one request of a call goes when the guard balances over several endpoints of an
// upstream (a pool of replicas): one endpoint, with its own adaptive limit and retry budget inside
// the guard's total. Implementations must be safe for concurrent use and fast.
type Target interface {
	// Address is the endpoint's base URL, which the request is sent to.
	Address() string
	// Limiter is the endpoint's own concurrency limit: its 429/503 answers shrink it, not the
	// guard's total.
	Limiter() *Limiter
	// Budget is the endpoint's own retry budget: a retry after its failure spends from it and
	// from the guard's total.
	Budget() *Budget
	// Finished reports the outcome of a request the picker sent to the endpoint (err nil for a
	// success), once for every successful Pick: a request whose wait for the endpoint's slot
	// ended before it was sent finishes Terminal with the wait's error.
	Finished(class Class, err error, latency time.Duration)
}

// Rotation is an optional interface of a Target, found by type assertion: OutOfRotation reports
// that its picker no longer routes to it (ejected after failures, failing its probes, or gone from
// the pool, while enough other endpoints are healthy), so a retry after its failure goes to
// another endpoint: a failover, which a spent retry budget paces instead of ending (see Guard.Do).
type Rotation interface {
	OutOfRotation() bool
}

// Picker chooses the target of each request of a call. previous is the target of the call's
// request before this one, nil for its first, and prevErr that request's error; a picker keeps a
// call on one endpoint unless that endpoint is unusable (affinity) or picks by load. Pick may wait
// (for endpoints to be known) until ctx ends. Implementations must be safe for concurrent use.
type Picker interface {
	Pick(ctx context.Context, turn agent.Turn, previous Target, prevErr error) (Target, error)
}

// MaxIdleConnsPerHost is how many idle connections an adapter's default transport keeps to each
// endpoint: enough for the turns a worker runs on one replica at once, so concurrent streams
// reuse connections instead of dialling anew for each request (net/http keeps 2).
const MaxIdleConnsPerHost = 64

// NewTransport is the adapters' default HTTP transport: Go's defaults (proxy from the
// environment, dial and TLS timeouts, HTTP/2 when offered), headerTimeout as the bound on an
// answer's headers, and MaxIdleConnsPerHost.
func NewTransport(headerTimeout time.Duration) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.ResponseHeaderTimeout = headerTimeout
	t.MaxIdleConnsPerHost = MaxIdleConnsPerHost
	return t
}
