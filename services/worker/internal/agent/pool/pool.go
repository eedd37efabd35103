package pool

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/turnstile-run/turnstile/pkg/lifecycle"
	"github.com/turnstile-run/turnstile/pkg/wire"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/upstream"
)

// ErrNoEndpoints is Pick's error while the pool knows no endpoint.
var ErrNoEndpoints = errors.New("no endpoints known")

// Pool is the set of endpoints of one upstream and the picker that spreads its requests over
// them; it is the upstream.Picker of the agent's guard. Its background work — re-resolving the
// sources, probing, forgetting idle sessions — has one lifecycle (Start, Stop). Safe for
// concurrent use.
type Pool struct {
	cfg     Config
	now     func() time.Time // time.Now; a test's clock in this package's tests
	sources []Source
	last    [][]string // each source's last good answer; a failed resolve keeps it
	parts   lifecycle.Group

	st    atomic.Pointer[state]
	ready chan struct{} // closed once the pool has known an endpoint
	watch chan struct{} // a Watcher source changed

	mu        sync.Mutex
	all       []*Endpoint
	byAddr    map[string]*Endpoint
	ring      ring
	table     map[string]*placement
	readyOnce sync.Once

	panics    atomic.Int64
	suspended atomic.Int64
	moves     atomic.Int64
}

// state is the immutable view Pick reads without the lock: the candidates (usable endpoints, or
// every endpoint in panic) and when it must be recomputed (the end of the earliest ejection).
type state struct {
	all        []*Endpoint
	candidates []*Endpoint
	panic      bool
	recheck    time.Time
}

// New returns a pool over the endpoints the sources name. Static sources are known at once;
// the others are resolved when the pool starts, and every ResolveInterval after.
func New(cfg Config, sources ...Source) *Pool {
	cfg.defaults()
	p := &Pool{
		cfg: cfg, now: time.Now, sources: sources, last: make([][]string, len(sources)), ready: make(chan struct{}),
		watch:  make(chan struct{}, 1),
		byAddr: map[string]*Endpoint{}, table: map[string]*placement{},
	}
	p.st.Store(&state{})
	var static []string
	for i, s := range sources {
		switch st := s.(type) {
		case Static:
			p.last[i] = []string(st)
			static = append(static, st...)
		case *Swap:
			p.last[i] = st.Known()
			static = append(static, p.last[i]...)
		}
	}
	if len(static) > 0 {
		p.Set(static)
	}
	for _, s := range sources {
		if c, ok := s.(lifecycle.Component); ok {
			p.parts.Add("pool source", c)
		}
	}
	p.parts.Add("pool resolver", &lifecycle.Runner{Name: "pool resolver", Run: p.resolveLoop})
	p.parts.Add("pool source watcher", &lifecycle.Runner{Name: "pool source watcher", Run: p.watchSources})
	if cfg.ProbePath != "" {
		p.parts.Add("pool prober", &lifecycle.Runner{Name: "pool prober", Run: p.probeLoop})
	}
	return p
}

// Config returns the pool's configuration with its defaults filled.
func (p *Pool) Config() Config { return p.cfg }

// Start resolves the sources and probes the endpoints in the background.
func (p *Pool) Start(ctx context.Context) error { return p.parts.Start(ctx) }

// Stop ends the background work. Safe twice and before Start.
func (p *Pool) Stop(ctx context.Context) error { return p.parts.Stop(ctx) }

// RouteKey is the key a turn is routed by: its session, named by tenant and session ID together
// (wire.SessionKey), so two tenants' sessions of one ID are two keys.
func RouteKey(turn agent.Turn) string {
	if turn.Tenant == "" {
		return turn.SessionID
	}
	return wire.NewSessionKey(turn.Tenant, turn.SessionID).String()
}

// Set makes addrs the pool's endpoints: new ones join healthy, missing ones leave (their
// sessions are placed again on their next request), and under Affinity the sessions whose ring
// home a joining endpoint is move to it within the load bound.
func (p *Pool) Set(addrs []string) {
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	want := map[string]bool{}
	for _, a := range addrs {
		want[a] = true
	}
	added := map[*Endpoint]bool{}
	var kept []*Endpoint
	var gone []string
	for _, ep := range p.all {
		if want[ep.addr] {
			kept = append(kept, ep)
			continue
		}
		ep.removed = true
		delete(p.byAddr, ep.addr)
		gone = append(gone, ep.addr)
	}
	var joined []string
	for _, a := range addrs {
		if _, ok := p.byAddr[a]; ok {
			continue
		}
		ep := &Endpoint{
			addr: a, pool: p, usable: true, probeOK: true,
			limiter: upstream.NewLimiter(p.cfg.Endpoint.Limiter),
			budget:  upstream.NewBudget(p.cfg.Endpoint.RetryRatio, p.cfg.Endpoint.RetryReserve, p.cfg.Endpoint.RetryPerSecond),
		}
		p.byAddr[a] = ep
		kept = append(kept, ep)
		added[ep] = true
		joined = append(joined, a)
	}
	if len(joined) == 0 && len(gone) == 0 {
		return
	}
	slices.SortFunc(kept, func(a, b *Endpoint) int {
		switch {
		case a.addr < b.addr:
			return -1
		case a.addr > b.addr:
			return 1
		}
		return 0
	})
	p.all = kept
	for k, pl := range p.table {
		if pl.ep.removed {
			pl.ep.sessions--
			delete(p.table, k)
		}
	}
	p.ring = newRing(kept)
	p.recompute(now)
	moved := 0
	if p.cfg.Policy == Affinity {
		moved = p.rebalance(added, now)
		p.moves.Add(int64(moved))
	}
	p.cfg.Log.Info("upstream pool endpoints changed", "upstream", p.cfg.Name, "endpoints", len(kept),
		"joined", joined, "left", gone, "sessions_moved", moved)
	if len(kept) > 0 {
		p.readyOnce.Do(func() { close(p.ready) })
	}
}

// Pick chooses the endpoint of a request of turn (see upstream.Picker). A retry stays on the
// endpoint of the request before it under Affinity unless that endpoint has become unusable or
// could not be connected to; under LeastRequest it goes to another endpoint when there is one.
// It waits until the pool knows an endpoint or ctx ends.
func (p *Pool) Pick(ctx context.Context, turn agent.Turn, previous upstream.Target, prevErr error) (upstream.Target, error) {
	select {
	case <-p.ready:
	default:
		select {
		case <-p.ready:
		case <-ctx.Done():
			return nil, errors.Join(ErrNoEndpoints, context.Cause(ctx))
		}
	}
	var avoid *Endpoint
	if prev, ok := previous.(*Endpoint); ok && (p.cfg.Policy == LeastRequest || upstream.Unreachable(prevErr)) {
		avoid = prev
	}
	var ep *Endpoint
	var key string
	pn, pinned := p.pinned(ctx)
	// A pinned turn remembers every endpoint it could not reach, so its retries do not go back
	// and forth between two unreachable ones the ring names in turn until they are ejected.
	var unreachable []*Endpoint
	if pn != nil {
		if avoid != nil && upstream.Unreachable(prevErr) {
			pn.unreachable(p, avoid)
		}
		unreachable = pn.unreached(p)
	}
	switch {
	case pinned != nil && pinned != avoid && !slices.Contains(unreachable, pinned) &&
		slices.Contains(p.current(p.now()).candidates, pinned):
		ep = pinned
	case p.cfg.Policy == LeastRequest:
		ep = p.leastRequest(avoid)
	default:
		key = RouteKey(turn)
		ep = p.affinity(key, avoid, unreachable)
	}
	if ep == nil {
		return nil, ErrNoEndpoints
	}
	if pn != nil && ep != pinned {
		pn.set(p, ep)
	}
	ep.inflight.Add(1)
	span := trace.SpanFromContext(ctx)
	lvl := slog.LevelDebug
	if previous != nil && previous != upstream.Target(ep) {
		lvl = slog.LevelInfo
	}
	logged := p.cfg.Log.Enabled(ctx, lvl)
	if !span.IsRecording() && !logged {
		return ep, nil
	}
	if key == "" {
		key = RouteKey(turn)
	}
	if span.IsRecording() {
		span.AddEvent("upstream request", trace.WithAttributes(attribute.String("turnstile.route_key", key),
			attribute.String("turnstile.endpoint", ep.addr), attribute.Bool("turnstile.retry", previous != nil)))
	}
	if logged {
		p.cfg.Log.Log(ctx, lvl, "upstream request", "upstream", p.cfg.Name, "route_key", key, "endpoint", ep.addr,
			"retry", previous != nil, "previous", address(previous))
	}
	return ep, nil
}

func address(t upstream.Target) string {
	if t == nil {
		return ""
	}
	return t.Address()
}

// current returns the state, recomputed first when an ejection has ended since it was made.
func (p *Pool) current(now time.Time) *state {
	st := p.st.Load()
	if st.recheck.IsZero() || now.Before(st.recheck) {
		return st
	}
	p.mu.Lock()
	p.recompute(now)
	p.mu.Unlock()
	return p.st.Load()
}

// leastRequest is the power of two choices: of two distinct candidates drawn at random, the one
// with fewer requests in flight.
func (p *Pool) leastRequest(avoid *Endpoint) *Endpoint {
	c := p.current(p.now()).candidates
	switch len(c) {
	case 0:
		return nil
	case 1:
		return c[0]
	}
	i := rand.IntN(len(c))     //nolint:gosec // load balancing needs no cryptographic randomness
	j := rand.IntN(len(c) - 1) //nolint:gosec // as above
	if j >= i {
		j++
	}
	a, b := c[i], c[j]
	switch {
	case a == avoid:
		return b
	case b == avoid:
		return a
	case b.inflight.Load() < a.inflight.Load():
		return b
	}
	return a
}

// affinity returns key's endpoint: where it was placed while that endpoint stays a candidate
// (and is neither avoid nor in also), else a new placement by bounded-load consistent hashing.
func (p *Pool) affinity(key string, avoid *Endpoint, also []*Endpoint) *Endpoint {
	now := p.now()
	p.current(now)
	p.mu.Lock()
	defer p.mu.Unlock()
	if pl, ok := p.table[key]; ok && pl.ep != avoid && !slices.Contains(also, pl.ep) && p.candidate(pl.ep) {
		pl.used = now
		return pl.ep
	}
	ep := p.place(key, avoid, also)
	if ep == nil {
		return nil
	}
	if pl, ok := p.table[key]; ok && pl.ep != ep {
		p.moves.Add(1)
	}
	p.assign(key, ep, now)
	return ep
}

// eject takes ep out of rotation after consecutive failures, for EjectTime times its ejection
// count (decayed by one per EjectTime it stayed in since its last return), at most EjectMaxTime;
// unless that would leave more than PanicThreshold of the pool unusable, when the ejection is
// suspended and said so.
func (p *Pool) eject(ep *Endpoint) {
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if ep.removed || !ep.ejectedTill.IsZero() {
		return
	}
	unusable := 0
	for _, e := range p.all {
		if !e.usable {
			unusable++
		}
	}
	if ep.usable && float64(unusable+1) > p.cfg.PanicThreshold*float64(len(p.all)) {
		p.suspended.Add(1)
		ep.consecutive.Store(0)
		p.cfg.Log.Warn("upstream pool ejection suspended: it would leave too few endpoints", "upstream", p.cfg.Name,
			"endpoint", ep.addr, "unusable", unusable, "endpoints", len(p.all), "panic_threshold", p.cfg.PanicThreshold)
		return
	}
	if !ep.returnedAt.IsZero() {
		ep.multiplier = max(0, ep.multiplier-int(now.Sub(ep.returnedAt)/p.cfg.EjectTime))
	}
	ep.multiplier++
	d := min(p.cfg.EjectTime*time.Duration(ep.multiplier), p.cfg.EjectMaxTime)
	ep.ejectedTill = now.Add(d)
	ep.ejections.Add(1)
	failures := ep.consecutive.Swap(0)
	p.recompute(now)
	p.cfg.Log.Warn("upstream endpoint ejected", "upstream", p.cfg.Name, "endpoint", ep.addr,
		"consecutive_failures", failures, "for", d, "ejections", ep.ejections.Load())
}

// recompute derives every endpoint's usability and the candidates from the ejections and probes,
// and enters or leaves panic. Callers hold mu.
func (p *Pool) recompute(now time.Time) {
	old := p.st.Load()
	st := &state{all: p.all}
	unusable := 0
	for _, ep := range p.all {
		if !ep.ejectedTill.IsZero() && !now.Before(ep.ejectedTill) {
			ep.ejectedTill, ep.returnedAt = time.Time{}, now
			p.cfg.Log.Info("upstream endpoint returns from ejection", "upstream", p.cfg.Name, "endpoint", ep.addr)
		}
		if !ep.ejectedTill.IsZero() && (st.recheck.IsZero() || ep.ejectedTill.Before(st.recheck)) {
			st.recheck = ep.ejectedTill
		}
		ep.usable = ep.ejectedTill.IsZero() && ep.probeOK
		if ep.usable {
			st.candidates = append(st.candidates, ep)
		} else {
			unusable++
		}
	}
	st.panic = len(p.all) > 0 && float64(unusable) > p.cfg.PanicThreshold*float64(len(p.all))
	if st.panic {
		st.candidates = p.all
	}
	switch {
	case st.panic && !old.panic:
		p.panics.Add(1)
		p.cfg.Log.Warn("upstream pool in panic: too many endpoints unhealthy, routing to all of them", "upstream", p.cfg.Name,
			"unhealthy", unusable, "endpoints", len(p.all), "panic_threshold", p.cfg.PanicThreshold)
	case !st.panic && old.panic:
		p.cfg.Log.Info("upstream pool leaves panic", "upstream", p.cfg.Name, "unhealthy", unusable, "endpoints", len(p.all))
	}
	p.st.Store(st)
}

// Stats is a snapshot of a pool, for metrics.
type Stats struct {
	Endpoints []EndpointStats
	// Panic says the pool routes to every endpoint because too many are unhealthy.
	Panic bool
	// Panics counts entries into panic; Suspended the ejections not made because of the threshold.
	Panics, Suspended int64
	// Moves counts sessions placed on another endpoint than before (a join, an ejection).
	Moves int64
}

// Stats returns a snapshot.
func (p *Pool) Stats() Stats {
	p.current(p.now())
	p.mu.Lock()
	defer p.mu.Unlock()
	s := Stats{Panic: p.st.Load().panic, Panics: p.panics.Load(), Suspended: p.suspended.Load(), Moves: p.moves.Load()}
	for _, ep := range p.all {
		s.Endpoints = append(s.Endpoints, ep.stats())
	}
	return s
}

// Placement returns the endpoint key is placed on under Affinity, "" when it is not placed.
func (p *Pool) Placement(key string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pl, ok := p.table[key]; ok {
		return pl.ep.addr
	}
	return ""
}
