package pool

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/upstream"
)

// clock is a test's time, moved by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// logBuffer collects a pool's log lines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type bundle struct {
	clock *clock
	log   *logBuffer
}

func addrs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("http://10.0.0.%d:8080/", i+1)
	}
	return out
}

func setup(t *testing.T, cfg Config, sources ...Source) (*Pool, *bundle) {
	t.Helper()
	b := &bundle{clock: &clock{t: time.Unix(1_700_000_000, 0)}, log: &logBuffer{}}
	cfg.Log = slog.New(slog.NewTextHandler(b.log, &slog.HandlerOptions{Level: slog.LevelInfo}))
	p := New(cfg, sources...)
	p.now = b.clock.now
	return p, b
}

func turn(session string) agent.Turn {
	return agent.Turn{TurnID: "t-" + session, SessionID: session, Tenant: "acme", Attempt: 1}
}

func pick(t *testing.T, p *Pool, session string) *Endpoint {
	t.Helper()
	tg, err := p.Pick(t.Context(), turn(session), nil, nil)
	require.NoError(t, err)
	ep := tg.(*Endpoint)
	ep.Finished(upstream.Terminal, nil, time.Millisecond)
	return ep
}

var errReset = fmt.Errorf("read: %w", syscall.ECONNRESET)

// fail reports n failed requests on ep.
func fail(ep *Endpoint, n int) {
	for range n {
		ep.inflight.Add(1)
		ep.Finished(upstream.Retryable, errReset, time.Millisecond)
	}
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	p, _ := setup(t, Config{})
	c := p.Config()
	require.Equal(t, Affinity, c.Policy)
	require.InDelta(t, config.AgentLoadFactorDefault, c.LoadFactor, 1e-9)
	require.Equal(t, config.AgentEjectFailuresDefault, c.EjectAfter)
	require.Equal(t, config.AgentEjectTimeDefault, c.EjectTime)
	require.Equal(t, config.AgentEjectMaxTimeDefault, c.EjectMaxTime)
	require.InDelta(t, 0.5, c.PanicThreshold, 1e-9)
	require.Equal(t, config.AgentProbeIntervalDefault, c.ProbeInterval)
	require.Equal(t, config.AgentResolveIntervalDefault, c.ResolveInterval)
	require.Equal(t, config.AgentAffinityIdleDefault, c.AffinityIdle)
	require.Equal(t, ProbeTimeoutDefault, c.ProbeTimeout)
}

func TestStartStop(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(srv.Close)
	p, _ := setup(t, Config{ProbePath: "/healthz", ProbeInterval: time.Millisecond, ResolveInterval: time.Millisecond}, Static{srv.URL})
	require.NoError(t, p.Stop(t.Context()), "stop before start")
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				require.NoError(t, p.Start(t.Context()))
				require.NoError(t, p.Stop(t.Context()))
			}
		}()
	}
	wg.Wait()
	require.NoError(t, p.Stop(t.Context()))
	require.NoError(t, p.Stop(t.Context()), "stop twice")
}

// TestAffinityBoundedLoad places 120 sessions over four endpoints: every session keeps its
// endpoint, none has more than 1.25 times the mean, and a fifth endpoint takes about a fifth.
func TestAffinityBoundedLoad(t *testing.T) {
	t.Parallel()
	p, _ := setup(t, Config{}, Static(addrs(4)))
	first := map[string]*Endpoint{}
	load := map[*Endpoint]int{}
	for i := range 120 {
		s := fmt.Sprintf("s-%03d", i)
		first[s] = pick(t, p, s)
		load[first[s]]++
	}
	for s, ep := range first {
		require.Same(t, ep, pick(t, p, s), "session %s keeps its endpoint", s)
	}
	require.Len(t, load, 4)
	for ep, n := range load {
		require.LessOrEqual(t, float64(n), 1.25*30, "endpoint %s holds %d sessions", ep.addr, n)
	}
	p.Set(addrs(5))
	moved := 0
	for s, ep := range first {
		now := pick(t, p, s)
		if now != ep {
			moved++
			require.Equal(t, addrs(5)[4], now.addr, "a session moves only to the joining endpoint")
		}
	}
	t.Logf("a fifth endpoint moved %d of 120 sessions (a fifth is 24)", moved)
	require.Positive(t, moved)
	require.LessOrEqual(t, moved, 24+6)
	require.Equal(t, int64(moved), p.Stats().Moves)
}

// TestAffinityRetry keeps a retry on its endpoint after a reset, and moves it after a refused
// connection.
func TestAffinityRetry(t *testing.T) {
	t.Parallel()
	p, _ := setup(t, Config{}, Static(addrs(4)))
	ep := pick(t, p, "s1")
	again, err := p.Pick(t.Context(), turn("s1"), ep, errReset)
	require.NoError(t, err)
	require.Same(t, ep, again, "a reset keeps the session's state holder")
	again.Finished(upstream.Terminal, nil, 0)
	refused := fmt.Errorf("dial: %w", syscall.ECONNREFUSED)
	other, err := p.Pick(t.Context(), turn("s1"), ep, refused)
	require.NoError(t, err)
	require.NotSame(t, ep, other, "an unreachable endpoint is left")
	other.Finished(upstream.Terminal, nil, 0)
	require.Equal(t, other.(*Endpoint).addr, p.Placement(RouteKey(turn("s1"))))
}

func TestLeastRequest(t *testing.T) {
	t.Parallel()
	// Two choices keep in-flight counts level, with high probability rather than always: of 20
	// pools holding 200 requests each, the median spread (most minus fewest in flight) is at most
	// 2 and the widest at most 10. A simulation of the policy over 20,000 such runs never broke
	// either bound, while one random choice per request spreads 200 requests by about 15.
	gaps := make([]int64, 20)
	for r := range gaps {
		p, _ := setup(t, Config{Policy: LeastRequest}, Static(addrs(4)))
		var held []upstream.Target
		for range 200 {
			tg, err := p.Pick(t.Context(), turn("s"), nil, nil)
			require.NoError(t, err)
			held = append(held, tg)
		}
		lo, hi := int64(1<<62), int64(0)
		counts := map[string]int64{}
		for _, e := range p.Stats().Endpoints {
			counts[e.Address] = e.Inflight
			lo, hi = min(lo, e.Inflight), max(hi, e.Inflight)
		}
		require.Len(t, counts, 4)
		gaps[r] = hi - lo
		if r == 0 {
			prev := held[0]
			for range 50 {
				tg, err := p.Pick(t.Context(), turn("s"), prev, errReset)
				require.NoError(t, err)
				require.NotSame(t, prev, tg, "a retry goes elsewhere")
				tg.Finished(upstream.Terminal, nil, 0)
			}
		}
		for _, tg := range held {
			tg.Finished(upstream.Terminal, nil, 0)
		}
	}
	slices.Sort(gaps)
	require.LessOrEqual(t, gaps[len(gaps)/2], int64(2), "two choices keep in-flight counts level: spreads %v", gaps)
	require.LessOrEqual(t, gaps[len(gaps)-1], int64(10), "two choices keep in-flight counts level: spreads %v", gaps)
}

// TestEjection ejects after EjectAfter failures, for longer each time, and brings the endpoint
// back when the ejection ends.
func TestEjection(t *testing.T) {
	t.Parallel()
	p, b := setup(t, Config{EjectAfter: 3, EjectTime: 10 * time.Second, EjectMaxTime: 25 * time.Second}, Static(addrs(4)))
	ep := p.byAddr[addrs(4)[0]]
	fail(ep, 2)
	require.False(t, p.Stats().Endpoints[0].Ejected, "two failures are not enough")
	ep.inflight.Add(1)
	ep.Finished(upstream.Terminal, nil, 0) // a success resets the count
	fail(ep, 2)
	require.False(t, p.Stats().Endpoints[0].Ejected)
	fail(ep, 1)
	require.True(t, p.Stats().Endpoints[0].Ejected, "the third consecutive failure ejects")
	for i := range 40 {
		require.NotSame(t, ep, pick(t, p, fmt.Sprintf("s%d", i)), "an ejected endpoint gets no requests")
	}
	require.Contains(t, b.log.String(), "upstream endpoint ejected")
	b.clock.add(10 * time.Second)
	require.False(t, p.Stats().Endpoints[0].Ejected, "back after the first ejection time")
	fail(ep, 3)
	b.clock.add(19 * time.Second)
	require.True(t, p.Stats().Endpoints[0].Ejected, "the second ejection lasts twice as long")
	b.clock.add(time.Second)
	require.False(t, p.Stats().Endpoints[0].Ejected)
	fail(ep, 3)
	b.clock.add(24 * time.Second)
	require.True(t, p.Stats().Endpoints[0].Ejected, "the third is capped at the maximum, 25s")
	b.clock.add(time.Second)
	require.False(t, p.Stats().Endpoints[0].Ejected)
	b.clock.add(25 * time.Second) // two ejection times in: the count decays from 3 to 1
	fail(ep, 3)
	b.clock.add(19 * time.Second)
	require.True(t, p.Stats().Endpoints[0].Ejected)
	b.clock.add(time.Second)
	require.False(t, p.Stats().Endpoints[0].Ejected, "a forgiven endpoint's ejection is short again")
	require.Equal(t, int64(4), p.Stats().Endpoints[0].Ejections)
	// Overload refusals and client errors do not eject.
	for range 10 {
		ep.inflight.Add(1)
		ep.Finished(upstream.Overload, &upstream.StatusError{Status: 503}, 0)
		ep.inflight.Add(1)
		ep.Finished(upstream.Retryable, &upstream.StatusError{Status: 409}, 0)
	}
	require.False(t, p.Stats().Endpoints[0].Ejected)
}

// TestEjectionNeverEmptiesPool: ejection stops at the panic threshold, and a pool of one is
// never ejected.
func TestEjectionNeverEmptiesPool(t *testing.T) {
	t.Parallel()
	p, b := setup(t, Config{EjectAfter: 1}, Static(addrs(4)))
	for _, a := range addrs(4) {
		fail(p.byAddr[a], 1)
	}
	st := p.Stats()
	ejected := 0
	for _, e := range st.Endpoints {
		if e.Ejected {
			ejected++
		}
	}
	require.Equal(t, 2, ejected, "half may be ejected, no more")
	require.Equal(t, int64(2), st.Suspended)
	require.Contains(t, b.log.String(), "ejection suspended")

	one, _ := setup(t, Config{EjectAfter: 1}, Static(addrs(1)))
	fail(one.byAddr[addrs(1)[0]], 5)
	require.False(t, one.Stats().Endpoints[0].Ejected)
	pick(t, one, "s")
}

// TestPanic probes four endpoints: with two failing, traffic avoids them; with three, the pool
// panics and routes to all four, and says so.
func TestPanic(t *testing.T) {
	t.Parallel()
	var bad [4]atomic.Bool
	var urls []string
	for i := range 4 {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			if bad[i].Load() {
				w.WriteHeader(http.StatusInternalServerError)
			}
		}))
		t.Cleanup(srv.Close)
		urls = append(urls, srv.URL+"/rpc")
	}
	p, b := setup(t, Config{ProbePath: "/healthz", Policy: LeastRequest}, Static(urls))
	spread := func() map[string]int {
		got := map[string]int{}
		for range 200 {
			got[pick(t, p, "s").addr]++
		}
		return got
	}
	bad[0].Store(true)
	bad[1].Store(true)
	p.ProbeNow(t.Context())
	require.Len(t, spread(), 4, "one failed probe is not enough")
	p.ProbeNow(t.Context())
	got := spread()
	require.Len(t, got, 2, "two failing endpoints get nothing: %v", got)
	require.False(t, p.Stats().Panic)
	bad[2].Store(true)
	p.ProbeNow(t.Context())
	p.ProbeNow(t.Context())
	require.True(t, p.Stats().Panic)
	require.Len(t, spread(), 4, "in panic every endpoint gets traffic")
	require.Contains(t, b.log.String(), "upstream pool in panic")
	bad[0].Store(false)
	p.ProbeNow(t.Context())
	require.False(t, p.Stats().Panic, "one endpoint passing again ends the panic")
	require.Equal(t, int64(1), p.Stats().Panics)
}

// flaky is a source that fails when told to.
type flaky struct {
	failing atomic.Bool
	addrs   atomic.Pointer[[]string]
	asked   chan struct{}
}

func (f *flaky) Resolve(context.Context) ([]string, error) {
	defer func() {
		select {
		case f.asked <- struct{}{}:
		default:
		}
	}()
	if f.failing.Load() {
		return nil, io.ErrUnexpectedEOF
	}
	return *f.addrs.Load(), nil
}

// TestResolve follows a source's changes and keeps its last answer while it fails; a pool that
// knows no endpoint yet makes a pick wait.
func TestResolve(t *testing.T) {
	t.Parallel()
	f := &flaky{asked: make(chan struct{})}
	f.failing.Store(true)
	two := addrs(2)
	f.addrs.Store(&two)
	p, b := setup(t, Config{ResolveInterval: time.Hour}, f)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	_, err := p.Pick(ctx, turn("s"), nil, nil)
	require.ErrorIs(t, err, ErrNoEndpoints)
	p.resolve(t.Context())
	require.Empty(t, p.Stats().Endpoints)
	f.failing.Store(false)
	p.resolve(t.Context())
	require.Len(t, p.Stats().Endpoints, 2)
	pick(t, p, "s")
	f.failing.Store(true)
	p.resolve(t.Context())
	require.Len(t, p.Stats().Endpoints, 2, "a failed resolve keeps the last endpoints")
	require.Contains(t, b.log.String(), "keeping its last endpoints")
	f.failing.Store(false)
	three := addrs(3)
	f.addrs.Store(&three)
	p.resolve(t.Context())
	require.Len(t, p.Stats().Endpoints, 3)
	one := addrs(1)
	f.addrs.Store(&one)
	p.resolve(t.Context())
	require.Len(t, p.Stats().Endpoints, 1)
	require.Equal(t, addrs(1)[0], pick(t, p, "s").addr, "a session on a departed endpoint is placed again")
}

func TestParseAndDNS(t *testing.T) {
	t.Parallel()
	srcs, err := Parse([]string{"http://a:1/", " http://b:2/v1 ", "dns+http://localhost:9/rpc"}, nil)
	require.NoError(t, err)
	require.Len(t, srcs, 2)
	require.Equal(t, Static{"http://a:1/", "http://b:2/v1"}, srcs[0])
	got, err := srcs[1].Resolve(t.Context())
	require.NoError(t, err)
	require.Contains(t, got, "http://127.0.0.1:9/rpc")
	for _, bad := range []string{"ftp://x/", "dns+nope", "http://"} {
		_, err := Parse([]string{bad}, nil)
		require.Error(t, err, bad)
	}
}

func TestRouteKey(t *testing.T) {
	t.Parallel()
	require.Equal(t, "acme/s1", RouteKey(agent.Turn{Tenant: "acme", SessionID: "s1"}))
	require.NotEqual(t, RouteKey(agent.Turn{Tenant: "a", SessionID: "s1"}), RouteKey(agent.Turn{Tenant: "b", SessionID: "s1"}))
}

// TestSwap replaces a running pool's endpoints the way an agents-file reload does: the static ones
// are known at once, a Set reaches the pool without waiting for ResolveInterval, and a failing
// source inside the swap keeps its last answer.
func TestSwap(t *testing.T) {
	t.Parallel()
	f := &flaky{asked: make(chan struct{}, 16)}
	dns := addrs(3)[2:]
	f.addrs.Store(&dns)
	sw := NewSwap([]Source{Static(addrs(1)), f})
	p, _ := setup(t, Config{ResolveInterval: time.Hour}, sw)
	require.Len(t, p.Stats().Endpoints, 1, "the static endpoint is known before the pool starts")
	require.NoError(t, p.Start(t.Context()))
	defer func() { require.NoError(t, p.Stop(context.Background())) }()
	endpoints := func() []string {
		var out []string
		for _, e := range p.Stats().Endpoints {
			out = append(out, e.Address)
		}
		slices.Sort(out)
		return out
	}
	waitEndpoints := func(want []string) {
		t.Helper()
		require.Eventually(t, func() bool { return slices.Equal(endpoints(), want) }, 10*time.Second, 5*time.Millisecond)
	}
	waitEndpoints([]string{addrs(1)[0], addrs(3)[2]})

	f.failing.Store(true)
	sw.Set([]Source{Static(addrs(2)[1:]), f})
	// The new static endpoint replaces the old one; the failing source has no answer of its own
	// yet after the Set, so the swap's resolve fails and the pool keeps its last set.
	got, err := sw.Resolve(t.Context())
	require.Error(t, err)
	require.Nil(t, got)
	f.failing.Store(false)
	sw.Set([]Source{Static(addrs(2)[1:]), f})
	waitEndpoints([]string{addrs(2)[1], addrs(3)[2]})
	f.failing.Store(true)
	got, err = sw.Resolve(t.Context())
	require.NoError(t, err, "a source that answered before keeps its last answer")
	require.Equal(t, []string{addrs(2)[1], addrs(3)[2]}, got)

	sw.Set([]Source{Static(addrs(1))})
	waitEndpoints(addrs(1))
}
