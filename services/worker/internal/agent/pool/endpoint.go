package pool

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/turnstile-run/turnstile/services/worker/internal/agent/upstream"
)

// Endpoint is one replica of a pool's upstream: its address, its own adaptive limit and retry
// budget, and its health. It is the upstream.Target of the requests routed to it.
type Endpoint struct {
	addr    string
	pool    *Pool
	limiter *upstream.Limiter
	budget  *upstream.Budget

	inflight     atomic.Int64
	consecutive  atomic.Int64
	requests     [5]atomic.Int64 // by outcome: ok, then upstream.Class of the failure
	ejections    atomic.Int64
	taskNotFound atomic.Int64

	// Guarded by pool.mu.
	idx         int       // position on the ring's endpoint list
	sessions    int       // affinity placements on this endpoint
	usable      bool      // a candidate: not ejected, passing its probes (or none configured)
	removed     bool      // no longer among the sources' endpoints
	ejectedTill time.Time // zero unless ejected
	multiplier  int       // ejections not yet decayed
	returnedAt  time.Time // when the last ejection ended
	probeOK     bool
	probeFails  int
}

// Address is the endpoint's base URL.
func (e *Endpoint) Address() string { return e.addr }

// Limiter is the endpoint's own adaptive concurrency limit.
func (e *Endpoint) Limiter() *upstream.Limiter { return e.limiter }

// OutOfRotation reports that the pool no longer routes to the endpoint: it left the pool, or it is
// ejected or failing its probes while the pool is not in panic (upstream.Rotation).
func (e *Endpoint) OutOfRotation() bool {
	st := e.pool.current(e.pool.now())
	e.pool.mu.Lock()
	defer e.pool.mu.Unlock()
	return e.removed || !e.usable && !st.panic
}

// Budget is the endpoint's own retry budget.
func (e *Endpoint) Budget() *upstream.Budget { return e.budget }

// Inflight is the requests routed to the endpoint that have not finished.
func (e *Endpoint) Inflight() int64 { return e.inflight.Load() }

// TaskNotFound records that the endpoint answered "task not found" for a task this worker
// created there (A2A -32001): the sign of a request routed to a replica that lacks the state.
func (e *Endpoint) TaskNotFound() { e.taskNotFound.Add(1) }

// Finished records a request's outcome: its in-flight count, counters and the endpoint's health.
func (e *Endpoint) Finished(class upstream.Class, err error, latency time.Duration) {
	e.inflight.Add(-1)
	if err == nil {
		e.requests[0].Add(1)
	} else {
		e.requests[1+int(class)].Add(1)
	}
	if o := e.pool.cfg.Observer; o != nil {
		o.Request(e.addr, class, err, latency)
	}
	switch {
	case err == nil:
		e.consecutive.Store(0)
	case failure(class, err):
		if e.consecutive.Add(1) >= int64(e.pool.cfg.EjectAfter) {
			e.pool.eject(e)
		}
	}
}

// failure says whether a request's error counts towards ejecting its endpoint: a connect error,
// a timeout, a reset or cut stream, a 5xx other than 503. Overload refusals (429, 503) shrink the
// endpoint's limit instead, and client errors and the turn's own end say nothing of its health.
func failure(class upstream.Class, err error) bool {
	if class != upstream.Retryable && class != upstream.Unavailable {
		return false
	}
	var se *upstream.StatusError
	if errors.As(err, &se) && se.Status < 500 {
		return false
	}
	return true
}

// EndpointStats is a snapshot of one endpoint, for metrics.
type EndpointStats struct {
	Address  string
	Inflight int64
	Limit    float64
	// Requests counts finished requests by outcome: "ok", "overload", "retryable", "unavailable",
	// "terminal".
	Requests     map[string]int64
	Ejected      bool
	ProbeOK      bool
	Ejections    int64
	TaskNotFound int64
	Sessions     int
	Retries      int64
	RetryDenied  int64
}

func (e *Endpoint) stats() EndpointStats {
	b := e.budget.Stats()
	return EndpointStats{
		Address: e.addr, Inflight: e.inflight.Load(), Limit: e.limiter.Limit(),
		Requests: map[string]int64{
			"ok": e.requests[0].Load(), upstream.Terminal.String(): e.requests[1+int(upstream.Terminal)].Load(),
			upstream.Retryable.String():   e.requests[1+int(upstream.Retryable)].Load(),
			upstream.Overload.String():    e.requests[1+int(upstream.Overload)].Load(),
			upstream.Unavailable.String(): e.requests[1+int(upstream.Unavailable)].Load(),
		},
		Ejected: !e.ejectedTill.IsZero(), ProbeOK: e.probeOK, Ejections: e.ejections.Load(),
		TaskNotFound: e.taskNotFound.Load(), Sessions: e.sessions, Retries: b.Retries, RetryDenied: b.Denied,
	}
}
