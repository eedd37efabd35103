package a2a_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	sdk "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/a2a"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/agenttest"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/pool"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/upstream"
)

// replicaEnv makes the test binary serve one replica on the address it names instead of running
// tests: the replica that TestPoolReplicaKilled kills with SIGKILL is a real process.
const replicaEnv = "TURNSTILE_TEST_A2A_REPLICA"

// memory is conversation state kept in memory only: the number of turns seen per context.
type memory struct {
	mu   sync.Mutex
	seen map[string]int
}

// replica is one replica of a remote A2A agent, on the official SDK's server: it keeps each
// conversation's state in memory and reports every turn that arrives without its earlier turns
// (context amnesia) by comparing the turns it has seen with the history the turn carries.
type replica struct {
	mem      *memory
	delay    func(turnID string) time.Duration
	turns    atomic.Int64
	inflight atomic.Int64
	amnesia  atomic.Int64
	noKey    atomic.Int64
	cardDown atomic.Bool
	// busy is the integral of inflight over time, in nanoseconds: the turn time it ran.
	busy atomic.Int64

	mu   sync.Mutex
	done map[string]int // completions by turn ID
}

func newReplica(mem *memory, delay func(string) time.Duration) *replica {
	if mem == nil {
		mem = &memory{seen: map[string]int{}}
	}
	return &replica{mem: mem, delay: delay, done: map[string]int{}}
}

func (r *replica) Execute(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	r.inflight.Add(1)
	start := time.Now()
	defer func() {
		r.busy.Add(int64(time.Since(start)))
		r.inflight.Add(-1)
	}()
	r.turns.Add(1)
	earlier := 0
	if h, ok := rc.Message.Metadata[a2a.HistoryKey].([]any); ok {
		earlier = len(h) / 2
	}
	r.mem.mu.Lock()
	if r.mem.seen[rc.Message.ContextID] != earlier {
		r.amnesia.Add(1)
	}
	r.mem.seen[rc.Message.ContextID] = earlier + 1
	r.mem.mu.Unlock()
	t := time.NewTimer(r.delay(rc.Message.ID))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
	}
	r.mu.Lock()
	r.done[rc.Message.ID]++
	r.mu.Unlock()
	// One final event: a replica killed mid-turn has streamed nothing, so the turn retries.
	ev := sdk.NewStatusUpdateEvent(&sdk.Task{ID: rc.TaskID, ContextID: rc.ContextID}, sdk.TaskStateCompleted,
		sdk.NewMessage(sdk.MessageRoleAgent, sdk.TextPart{Text: "answer " + rc.Message.ID}))
	ev.Final = true
	return q.Write(ctx, ev)
}

func (r *replica) Cancel(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	ev := sdk.NewStatusUpdateEvent(&sdk.Task{ID: rc.TaskID, ContextID: rc.ContextID}, sdk.TaskStateCanceled, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

// handler serves the JSON-RPC endpoint at / and the Agent Card, which answers 500 while cardDown.
func (r *replica) handler(url string) http.Handler {
	rpc := a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(r))
	card := a2asrv.NewStaticAgentCardHandler(&sdk.AgentCard{Name: "replica", URL: url, PreferredTransport: sdk.TransportProtocolJSONRPC})
	mux := http.NewServeMux()
	mux.HandleFunc(a2asrv.WellKnownAgentCardPath, func(w http.ResponseWriter, req *http.Request) {
		if r.cardDown.Load() {
			http.Error(w, "unhealthy", http.StatusInternalServerError)
			return
		}
		card.ServeHTTP(w, req)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, req *http.Request) {
		if req.Header.Get(a2a.RouteKeyHeader) == "" {
			r.noKey.Add(1)
		}
		rpc.ServeHTTP(w, req)
	})
	return mux
}

func (r *replica) completions() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.done))
	for k, v := range r.done {
		out[k] = v
	}
	return out
}

// skewed is a turn duration: a fifth of the turns are ten times longer than the rest.
func skewed(turnID string) time.Duration {
	h := fnv.New32a()
	_, _ = h.Write([]byte(turnID))
	if h.Sum32()%5 == 0 {
		return time.Second
	}
	return 100*time.Millisecond + time.Duration(h.Sum32()%50)*time.Millisecond
}

func startReplica(t *testing.T, mem *memory, delay func(string) time.Duration) (*replica, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	url := "http://" + ln.Addr().String() + "/"
	r := newReplica(mem, delay)
	srv := httptest.NewUnstartedServer(r.handler(url))
	_ = srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return r, url
}

// serveReplica is the child process's whole life: it serves one replica until it is killed.
func serveReplica(addr string) {
	r := newReplica(nil, func(string) time.Duration { return 60 * time.Millisecond })
	srv := &http.Server{Addr: addr, Handler: r.handler("http://" + addr + "/"), ReadHeaderTimeout: 10 * time.Second}
	if err := srv.ListenAndServe(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// child is a replica running as a child process of the test.
type child struct {
	cmd  *exec.Cmd
	logs *testenv.SyncBuffer
	done chan struct{}
}

func startChild(t *testing.T, addr string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), replicaEnv+"="+addr)
	c := &child{cmd: cmd, logs: &testenv.SyncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = c.logs, c.logs
	require.NoError(t, cmd.Start())
	go func() {
		_ = cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-c.done
	})
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr + a2asrv.WellKnownAgentCardPath)
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 30*time.Second, 10*time.Millisecond, "replica process did not answer: %s", c.logs.String())
	return c
}

func (c *child) kill(t *testing.T) {
	t.Helper()
	require.NoError(t, c.cmd.Process.Signal(syscall.SIGKILL))
	<-c.done
}

// poolAgent is the A2A agent over a pool of the replicas' URLs, as the worker builds it.
func poolAgent(t *testing.T, cfg pool.Config, urls []string, wrap ...func(*pool.Pool) upstream.Picker) (*a2a.Agent, *pool.Pool, *upstream.Guard) {
	t.Helper()
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	cfg.Endpoint = upstream.Config{RetryReserve: 200, Limiter: upstream.LimiterConfig{Initial: 64}}
	p := pool.New(cfg, pool.Static(urls))
	require.NoError(t, p.Start(t.Context()))
	t.Cleanup(func() { require.NoError(t, p.Stop(context.Background())) })
	var picker upstream.Picker = p
	for _, w := range wrap {
		picker = w(p)
	}
	g := upstream.New(upstream.Config{
		Name: "replicas", Backoff: 20 * time.Millisecond, Picker: picker, RetryReserve: 200,
		Limiter: upstream.LimiterConfig{Initial: 1024, Min: 1024, Max: 1024},
	})
	ag, err := a2a.New(t.Context(), a2a.Config{Guard: g})
	require.NoError(t, err)
	t.Cleanup(func() { _ = ag.Close() })
	return ag, p, g
}

func session(i int) string { return fmt.Sprintf("conv-%03d", i) }

func turnID(s string, k int) string { return fmt.Sprintf("%s-t%d", s, k) }

// runTurns runs turns from..to-1 of n concurrent sessions, each turn with the history of the
// turns before it, and checks each answer arrived exactly once.
func runTurns(t *testing.T, ag *a2a.Agent, sessions []string, from, to int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(sessions))
	for _, s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := from; k < to; k++ {
				var hist []agent.Message
				for j := range k {
					m := agent.TurnMessages(int64(2*j+2), turnID(s, j), "q", "a")
					hist = append(hist, m[:]...)
				}
				id := turnID(s, k)
				sink := &agenttest.Sink{}
				res, err := ag.Run(context.Background(), agent.Turn{
					TurnID: id, SessionID: s, Tenant: "acme", Attempt: 1, Text: "question " + id,
					Deadline: time.Now().Add(time.Minute),
				}, hist, sink)
				if err != nil {
					errs <- fmt.Errorf("turn %s: %w", id, err)
					return
				}
				if d := sink.Deltas(); len(d) != 1 || d[0] != "answer "+id || res.Text != "answer "+id {
					errs <- fmt.Errorf("turn %s answered %q (%q), want it once", id, d, res.Text)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

func sessions(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, session(i))
	}
	return out
}

// TestPoolAffinity is seed 000's worked example scaled down: four replicas with in-memory state,
// 120 concurrent conversations of four turns; a fifth replica joins after the second turn.
func TestPoolAffinity(t *testing.T) {
	t.Parallel()
	var reps []*replica
	var urls []string
	for range 5 {
		r, u := startReplica(t, nil, func(id string) time.Duration { return skewed(id) / 10 })
		reps, urls = append(reps, r), append(urls, u)
	}
	ag, p, _ := poolAgent(t, pool.Config{Policy: pool.Affinity}, urls[:4])
	all := sessions(0, 120)
	runTurns(t, ag, all, 0, 2)

	var amnesia, total, busiest int64
	for _, r := range reps[:4] {
		amnesia += r.amnesia.Load()
		total += r.turns.Load()
		busiest = max(busiest, r.turns.Load())
		require.Zero(t, r.noKey.Load(), "every request carries the route key")
	}
	mean := float64(total) / 4
	t.Logf("affinity, 4 replicas: turns per replica %d %d %d %d, busiest %.2fx the mean, %d turns without context",
		reps[0].turns.Load(), reps[1].turns.Load(), reps[2].turns.Load(), reps[3].turns.Load(), float64(busiest)/mean, amnesia)
	require.Equal(t, int64(240), total)
	require.Zero(t, amnesia, "no turn arrives without its context")
	require.LessOrEqual(t, float64(busiest), 1.25*mean)

	before := map[string]string{}
	for _, s := range all {
		before[s] = p.Placement("acme/" + s)
	}
	p.Set(urls)
	runTurns(t, ag, all, 2, 4)
	moved := 0
	for _, s := range all {
		if after := p.Placement("acme/" + s); after != before[s] {
			moved++
			require.Equal(t, urls[4], after, "sessions move only to the joining replica")
		}
	}
	amnesia = 0
	for _, r := range reps {
		amnesia += r.amnesia.Load()
	}
	t.Logf("affinity: a fifth replica moved %d of 120 sessions (%.1f%%; a fifth is 24); %d turns without context, one per moved session",
		moved, 100*float64(moved)/120, amnesia)
	require.Positive(t, moved, "the fifth replica takes its share")
	require.LessOrEqual(t, moved, 24+6, "at most a fifth of the sessions plus a margin move")
	require.Equal(t, int64(moved), amnesia, "only a moved session's first turn on its new replica lacks context")
	require.Equal(t, int64(moved*2), reps[4].turns.Load())
}

// TestPoolLeastRequest runs 240 conversations on four replicas that share their state, with a
// fifth of the turns ten times longer: each replica's requests in flight, averaged over the run
// (the integral of its in-flight count over time, which every replica measures exactly), stay
// within 15% of the mean, or within two requests of it when a busy machine keeps fewer in flight
// than the 16 a replica the test aims at (two choices keep replicas within a request or two of
// each other, whatever the load).
func TestPoolLeastRequest(t *testing.T) {
	t.Parallel()
	mem := &memory{seen: map[string]int{}}
	var reps []*replica
	var urls []string
	for range 4 {
		r, u := startReplica(t, mem, skewed)
		reps, urls = append(reps, r), append(urls, u)
	}
	ag, _, _ := poolAgent(t, pool.Config{Policy: pool.LeastRequest}, urls)
	start := time.Now()
	// 240 concurrent sessions keep about 16 requests in flight per replica: two choices keep
	// replicas within a request or two of each other, which at 8 in flight (120 sessions) is
	// already 15% and leaves the bound to chance.
	runTurns(t, ag, sessions(0, 240), 0, 6)
	wall := time.Since(start)
	var total int64
	for _, r := range reps {
		total += r.busy.Load()
	}
	mean := float64(total) / 4
	var spread []string
	for _, r := range reps {
		b := float64(r.busy.Load())
		spread = append(spread, fmt.Sprintf("%.1f (%+.1f%%, %d turns)", b/float64(wall), 100*(b/mean-1), r.turns.Load()))
	}
	t.Logf("least-request: mean in flight per replica over %v: %s", wall.Round(time.Millisecond), strings.Join(spread, ", "))
	// The bound as a share of the mean: 15%, or two requests in flight when the mean is below 13.
	bound := max(0.15, 2/(mean/float64(wall)))
	for i, r := range reps {
		require.InDelta(t, 0, float64(r.busy.Load())/mean-1, bound, "replica %d's mean in flight is within %.0f%% of the mean: %s",
			i, 100*bound, strings.Join(spread, ", "))
		require.Zero(t, r.amnesia.Load(), "shared state: no turn lacks its context")
	}
}

// TestPoolReplicaKilled SIGKILLs one of four replicas, a real process, mid-run: it is ejected
// within the configured failures, its turns retry on the others and complete once, and the
// restarted replica gets turns again.
func TestPoolReplicaKilled(t *testing.T) {
	t.Parallel()
	const ejectAfter = 3
	var reps []*replica
	var urls []string
	for range 3 {
		r, u := startReplica(t, nil, func(string) time.Duration { return 60 * time.Millisecond })
		reps, urls = append(reps, r), append(urls, u)
	}
	addr := testenv.FreeAddr(t)
	victimURL := "http://" + addr + "/"
	victim := startChild(t, addr)
	urls = append(urls, victimURL)
	// Requests started on the victim after its first failure was seen, and while it was ejected.
	var seenDead atomic.Bool
	var afterDeath, whileEjected atomic.Int64
	logs := &testenv.SyncBuffer{}
	obs := observerFunc(func(endpoint string, err error) {
		if endpoint == victimURL && err != nil {
			seenDead.Store(true)
		}
	})
	ag, p, g := poolAgent(t, pool.Config{EjectAfter: ejectAfter, EjectTime: 3 * time.Second, Observer: obs, Log: slog.New(slog.NewTextHandler(logs, nil))}, urls,
		func(pl *pool.Pool) upstream.Picker {
			return pickerFunc(func(ctx context.Context, turn agent.Turn, prev upstream.Target, prevErr error) (upstream.Target, error) {
				// Ejected before the pick began, not during it (a concurrent failure may eject it then).
				ejected := victimEjected(pl.Stats(), victimURL)
				tg, err := pl.Pick(ctx, turn, prev, prevErr)
				if err == nil && tg.Address() == victimURL && seenDead.Load() {
					afterDeath.Add(1)
					if ejected {
						whileEjected.Add(1)
					}
				}
				return tg, err
			})
		})
	stats := func() pool.EndpointStats {
		for _, e := range p.Stats().Endpoints {
			if e.Address == victimURL {
				return e
			}
		}
		t.Fatal("victim not in the pool")
		return pool.EndpointStats{}
	}
	all := sessions(0, 120)
	runTurns(t, ag, all, 0, 1)
	require.Positive(t, stats().Requests["ok"], "the victim served turns")

	killed := make(chan int64, 1)
	go func() {
		// Kill it while the second round of turns runs on it.
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		n := stats().Inflight
		for ; n < 10; n = stats().Inflight {
			<-tick.C
		}
		victim.kill(t)
		killed <- n
	}()
	runTurns(t, ag, all, 1, 4)
	inflightAtKill := <-killed
	st := stats()
	failed := st.Requests[upstream.Retryable.String()]
	t.Logf("killed with about %d requests in flight: %d failed requests, %d started after its first failure, %d ejection; %d calls for %d turns",
		inflightAtKill, failed, afterDeath.Load(), st.Ejections, g.Calls(), 480)
	require.GreaterOrEqual(t, st.Ejections, int64(1), "the dead replica was ejected (again after each ejection time it stays dead)")
	// Exactly on the third failure is pool.TestEjection's to show; here concurrent failures of the
	// dropped requests race the ejection, so the log names the ejection, and no request follows it.
	require.Contains(t, logs.String(), "upstream endpoint ejected")
	require.Zero(t, whileEjected.Load(), "no request reaches it while it is ejected")
	for _, r := range reps {
		for id, n := range r.completions() {
			require.Equal(t, 1, n, "turn %s completed once", id)
		}
	}

	victim = startChild(t, addr)
	require.Eventually(t, func() bool { return !stats().Ejected }, 10*time.Second, 10*time.Millisecond)
	served := stats().Requests["ok"]
	runTurns(t, ag, sessions(200, 260), 0, 1)
	t.Logf("the restarted replica served %d of 60 new conversations' turns", stats().Requests["ok"]-served)
	require.Greater(t, stats().Requests["ok"], served, "the restarted replica rejoins")
}

func victimEjected(s pool.Stats, url string) bool {
	for _, e := range s.Endpoints {
		if e.Address == url {
			return e.Ejected
		}
	}
	return false
}

type observerFunc func(endpoint string, err error)

func (f observerFunc) Request(endpoint string, _ upstream.Class, err error, _ time.Duration) {
	f(endpoint, err)
}

type pickerFunc func(ctx context.Context, turn agent.Turn, prev upstream.Target, prevErr error) (upstream.Target, error)

func (f pickerFunc) Pick(ctx context.Context, turn agent.Turn, prev upstream.Target, prevErr error) (upstream.Target, error) {
	return f(ctx, turn, prev, prevErr)
}

// TestPoolPanic fails the probes of three of four replicas: the pool panics, says so, and keeps
// every replica in traffic; with two failing, only the healthy two get turns.
func TestPoolPanic(t *testing.T) {
	t.Parallel()
	var reps []*replica
	var urls []string
	for range 4 {
		r, u := startReplica(t, nil, func(string) time.Duration { return 5 * time.Millisecond })
		reps, urls = append(reps, r), append(urls, u)
	}
	logs := &testenv.SyncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	ag, p, _ := poolAgent(t, pool.Config{ProbePath: a2a.ProbePath, ProbeInterval: time.Hour, Log: log}, urls)
	counts := func() []int64 {
		var out []int64
		for _, r := range reps {
			out = append(out, r.turns.Load())
		}
		return out
	}
	reps[0].cardDown.Store(true)
	reps[1].cardDown.Store(true)
	p.ProbeNow(t.Context())
	p.ProbeNow(t.Context())
	runTurns(t, ag, sessions(0, 40), 0, 2)
	got := counts()
	require.Zero(t, got[0]+got[1], "replicas failing their probes get no turns: %v", got)
	require.False(t, p.Stats().Panic)

	reps[2].cardDown.Store(true)
	p.ProbeNow(t.Context())
	p.ProbeNow(t.Context())
	require.True(t, p.Stats().Panic, "three of four unhealthy: panic")
	runTurns(t, ag, sessions(100, 140), 0, 2)
	after := counts()
	var added int64
	for i := range after {
		added += after[i] - got[i]
	}
	require.Equal(t, int64(80), added)
	require.Positive(t, after[0], "in panic a replica failing its probes gets turns: %v", after)
	require.Positive(t, after[1], "in panic a replica failing its probes gets turns: %v", after)
	require.Less(t, after[3]-got[3], added, "the one healthy replica does not take everything: %v", after)
	t.Logf("panic: turns per replica %v before, %v after", got, after)
	require.Contains(t, logs.String(), "upstream pool in panic")
	require.Equal(t, int64(1), p.Stats().Panics)
}

// amnesiac is a replica that runs a task until its caller goes away, and answers a tasks/cancel
// as a replica without the task would: JSON-RPC -32001, "task not found".
type amnesiac struct {
	stop chan struct{} // closed at the test's end: the task ends then
}

func (a amnesiac) Execute(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	ev := sdk.NewStatusUpdateEvent(&sdk.Task{ID: rc.TaskID, ContextID: rc.ContextID}, sdk.TaskStateWorking,
		sdk.NewMessage(sdk.MessageRoleAgent, sdk.TextPart{Text: "thinking"}))
	if err := q.Write(ctx, ev); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-a.stop:
		done := sdk.NewStatusUpdateEvent(&sdk.Task{ID: rc.TaskID, ContextID: rc.ContextID}, sdk.TaskStateCanceled, nil)
		done.Final = true
		return q.Write(context.Background(), done)
	}
}

func (a amnesiac) Cancel(context.Context, *a2asrv.RequestContext, eventqueue.Queue) error {
	return sdk.ErrTaskNotFound
}

// TestPoolTaskNotFound counts a "task not found" answer to the forwarded cancel against the
// endpoint that gave it: the sign of a request routed to a replica without the task.
func TestPoolTaskNotFound(t *testing.T) {
	t.Parallel()
	stop := make(chan struct{})
	rpc := a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(amnesiac{stop: stop}))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct {
			ID     any    `json:"id"`
			Method string `json:"method"`
		}
		_ = json.Unmarshal(body, &req)
		if req.Method == "tasks/cancel" {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": map[string]any{"code": -32001, "message": "Task not found"}})
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		rpc.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stop) })
	ag, p, _ := poolAgent(t, pool.Config{}, []string{srv.URL})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	started := make(chan struct{})
	var once sync.Once
	sink := &agenttest.Sink{OnEvent: func(agenttest.Event) { once.Do(func() { close(started) }) }}
	go func() {
		_, err := ag.Run(ctx, agent.Turn{TurnID: "t1", SessionID: "s1", Tenant: "acme", Attempt: 1, Deadline: time.Now().Add(time.Minute)}, nil, sink)
		done <- err
	}()
	<-started // the task's first event reached the agent: it knows the task ID
	cancel()
	require.Error(t, <-done)
	require.Equal(t, int64(1), p.Stats().Endpoints[0].TaskNotFound)
}
