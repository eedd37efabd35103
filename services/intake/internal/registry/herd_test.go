package registry

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/agents"
	"github.com/turnstile-run/turnstile/pkg/registry"
	"github.com/turnstile-run/turnstile/pkg/registry/client"
	"github.com/turnstile-run/turnstile/pkg/registry/snapshot"
	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// timing wraps a handler and records every request's time in the handler and its status.
type timing struct {
	next    http.Handler
	mu      sync.Mutex
	longest time.Duration
	status  map[int]int
	// noRetryAfter counts 503s without a Retry-After.
	noRetryAfter int
}

func (tm *timing) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &statusRecorder{ResponseWriter: w, status: 200}
	tm.next.ServeHTTP(rec, r)
	took := time.Since(start)
	tm.mu.Lock()
	defer tm.mu.Unlock()
	tm.longest = max(tm.longest, took)
	if tm.status == nil {
		tm.status = map[int]int{}
	}
	tm.status[rec.status]++
	if rec.status == http.StatusServiceUnavailable && w.Header().Get("Retry-After") == "" {
		tm.noRetryAfter++
	}
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) { s.status = code; s.ResponseWriter.WriteHeader(code) }

// TestRecoveryHerd: 120 replicas register at once with a registry that admits 8 requests at a
// time; then the registry restarts (a new handler over the same store, after every lease ran
// out) and all 120 renew at once. Every replica is back within a printed bound, no request waits
// longer than the clients' timeout, the sheds are 503 with Retry-After, and after the restart no
// replica registers again (their registrations were frozen, not removed).
func TestRecoveryHerd(t *testing.T) {
	t.Parallel()
	const n, timeout = 120, 2 * time.Second
	env := testenv.New(t, testenv.Options{Partitions: 1})
	cat := catalog(t)
	lease := 3 * time.Second
	serve := func(start bool) (*httptest.Server, *timing, *Handler) {
		h := New(Config{Lease: lease, MaxInflight: 8, Agents: func() *agents.Catalog { return cat }},
			Deps{Pool: env.Pool, Log: env.Log, Registry: prometheus.NewRegistry()})
		r := chi.NewRouter()
		h.Routes(r)
		tm := &timing{next: r}
		if !start {
			return httptest.NewUnstartedServer(tm), tm, h
		}
		return httptest.NewServer(tm), tm, h
	}
	srv, tm, h := serve(true)
	url := srv.URL
	var registered, renewedAfter atomic.Int64
	renewedBy := make([]atomic.Bool, n)
	phase2 := atomic.Bool{}
	keepers := make([]*client.Keeper, n)
	for i := range keepers {
		k, err := client.New(client.Config{
			URL: url, Agent: "echo", RequestTimeout: timeout, NoDeregister: true, Log: env.Log,
			Registration: registry.Registration{
				InstanceID: fmt.Sprintf("echo-%03d", i), Endpoint: fmt.Sprintf("http://10.1.%d.%d:9000/", i/100, i%100+1),
				Zone: string(rune('a' + i%3)),
			},
			Hooks: client.Hooks{
				Registered: func(registry.Lease) { registered.Add(1) },
				Renewed: func(registry.Lease) {
					if phase2.Load() && !renewedBy[i].Swap(true) {
						renewedAfter.Add(1)
					}
				},
			},
		})
		require.NoError(t, err)
		keepers[i] = k
	}
	start := time.Now()
	for _, k := range keepers {
		require.NoError(t, k.Start(t.Context()))
	}
	defer func() {
		for _, k := range keepers {
			_ = k.Stop(context.Background())
		}
	}()
	testenv.WaitFor(t, 60*time.Second, "every replica registered", func() bool { return registered.Load() == n })
	took := time.Since(start)
	tm.mu.Lock()
	shed, longest, bad := tm.status[http.StatusServiceUnavailable], tm.longest, tm.noRetryAfter
	tm.mu.Unlock()
	t.Logf("registration herd: %d replicas registered in %s; %d requests shed with 503, longest request %s (client timeout %s)",
		n, took.Round(time.Millisecond), shed, longest.Round(time.Millisecond), timeout)
	require.Positive(t, shed, "the herd exceeded the admission limit")
	require.Zero(t, bad, "every 503 carries Retry-After")
	require.Less(t, longest, timeout, "no request waits past its timeout")
	require.Less(t, took, 30*time.Second, "bound")

	// The registry goes away for longer than a lease: every lease runs out, and the first sweep
	// after it comes back freezes them all (a storm, not 120 crashes).
	srv.Close()
	_, err := env.Pool.Exec(t.Context(), `UPDATE agent_instances SET lease_expires_at = now() - interval '1 second'`)
	require.NoError(t, err)
	sweeps := make(chan []AgentCount, 1)
	sw := NewSweeper(SweepConfig{OnSweep: func(c []AgentCount, _ bool, _ error) { sweeps <- c }}, h.Store(), env.Log, nil)
	sw.Sweep(t.Context())
	counts := <-sweeps
	require.True(t, counts[slices.IndexFunc(counts, func(c AgentCount) bool { return c.Agent == "echo" })].Held)

	// Restart on the same address: the replicas renew their frozen registrations.
	srv2, tm2, _ := serve(false)
	defer srv2.Close()
	srv2.Listener.Close()
	srv2.Listener = listenOn(t, strings.TrimPrefix(url, "http://"))
	srv2.Start()
	phase2.Store(true)
	before := registered.Load()
	restarted := time.Now()
	testenv.WaitFor(t, 60*time.Second, "every replica renewed after the restart", func() bool { return renewedAfter.Load() == n })
	took = time.Since(restarted)
	tm2.mu.Lock()
	total, shed, longest, bad := 0, tm2.status[http.StatusServiceUnavailable], tm2.longest, tm2.noRetryAfter
	for _, c := range tm2.status {
		total += c
	}
	tm2.mu.Unlock()
	t.Logf("recovery herd: %d replicas renewed in %s after the restart; %d requests (%.0f/s), %d shed with 503, longest %s; re-registrations %d",
		n, took.Round(time.Millisecond), total, float64(total)/took.Seconds(), shed, longest.Round(time.Millisecond), registered.Load()-before)
	require.Equal(t, before, registered.Load(), "no replica registered again")
	require.Zero(t, bad)
	require.Less(t, longest, timeout)
	require.Less(t, took, 30*time.Second, "bound")
	_ = srv2.URL
}

// listenOn listens on addr again once its old listener let go of it.
func listenOn(t *testing.T, addr string) net.Listener {
	t.Helper()
	var ln net.Listener
	testenv.WaitFor(t, 10*time.Second, "the registry's address is free again", func() bool {
		var err error
		ln, err = net.Listen("tcp", addr)
		return err == nil
	})
	return ln
}

// childEnv marks the test binary run as a replica process by TestPausedReplica.
const childEnv = "TURNSTILE_REGISTRY_TEST_CHILD"

// runChild is the replica process: an HTTP endpoint and a keeper that registers it as echo-0,
// printing what happens to its registration on stdout, one event a line. It exits once a
// replacement holds its ID.
func runChild() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	srv := &http.Server{Handler: ok, ReadHeaderTimeout: time.Second}
	go func() { _ = srv.Serve(ln) }()
	endpoint := "http://" + ln.Addr().String() + "/"
	var mu sync.Mutex
	say := func(f string, a ...any) { mu.Lock(); fmt.Printf(f+"\n", a...); mu.Unlock() }
	k, err := client.New(client.Config{
		URL: os.Getenv(childEnv), Agent: "echo", Heartbeat: 100 * time.Millisecond, NoDeregister: true,
		Registration: registry.Registration{InstanceID: "echo-0", Endpoint: endpoint, Zone: "a"},
		Hooks: client.Hooks{
			Registered: func(l registry.Lease) { say("registered %d %s", l.Epoch, endpoint) },
			Stale:      func(e int64) { say("stale %d", e) },
			Superseded: func() { say("superseded") },
		},
	})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	ctx := context.Background()
	_ = k.Start(ctx)
	<-k.Superseded()
	_ = k.Stop(ctx)
	_ = srv.Close()
}

// TestPausedReplica: a real replica process registers, is paused (SIGSTOP) past its lease and
// replaced by a new registration of its instance ID; resumed (SIGCONT), its heartbeat gets 412,
// its registration again is refused, it stops, and its old endpoint never returns to the
// snapshot a worker follows.
func TestPausedReplica(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{Lease: 600 * time.Millisecond})
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+b.srv.URL)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = io.Discard
	require.NoError(t, cmd.Start())
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	next := func() string {
		select {
		case l, ok := <-lines:
			require.True(t, ok, "the replica process ended early")
			return l
		case <-time.After(20 * time.Second):
			t.Fatal("the replica process said nothing")
			return ""
		}
	}
	var epoch int64
	var old string
	_, err = fmt.Sscanf(next(), "registered %d %s", &epoch, &old)
	require.NoError(t, err)

	// A worker's view: a follower of the agent's registrations; once the replacement is in it,
	// no snapshot may hold the old endpoint again.
	var replaced atomic.Bool
	var resurrected, refreshes atomic.Int64
	f, err := snapshot.New(snapshot.Config{
		URL: b.srv.URL, Agent: "echo", Refresh: 20 * time.Millisecond,
		OnRefresh: func(s *snapshot.Snapshot, err error) {
			if err != nil || s == nil {
				return
			}
			refreshes.Add(1)
			if replaced.Load() && slices.Contains(s.Endpoints(), old) {
				resurrected.Add(1)
			}
		},
	})
	require.NoError(t, err)
	require.NoError(t, f.Start(t.Context()))
	defer func() { require.NoError(t, f.Stop(context.Background())) }()

	require.NoError(t, cmd.Process.Signal(syscall.SIGSTOP))
	testenv.WaitFor(t, 20*time.Second, "the paused replica's lease ran out", func() bool {
		var expired bool
		err := b.env.Pool.QueryRow(t.Context(), `SELECT lease_expires_at < now() FROM agent_instances WHERE instance_id = 'echo-0'`).Scan(&expired)
		return err == nil && expired
	})
	repl := b.register(t, "echo-0", "http://127.0.0.2:9/", "b")
	require.Greater(t, repl.Epoch, epoch)
	testenv.WaitFor(t, 20*time.Second, "the worker's snapshot holds the replacement", func() bool {
		s := f.Current()
		return s != nil && slices.Contains(s.Endpoints(), "http://127.0.0.2:9/") && !slices.Contains(s.Endpoints(), old)
	})
	replaced.Store(true)
	require.NoError(t, cmd.Process.Signal(syscall.SIGCONT))
	require.Equal(t, fmt.Sprintf("stale %d", epoch), next(), "the resumed heartbeat gets 412")
	require.Equal(t, "superseded", next(), "its registration again is refused, and it stops")
	require.NoError(t, cmd.Wait())
	seen := refreshes.Load()
	testenv.WaitFor(t, 20*time.Second, "the worker refreshed a few more times", func() bool { return refreshes.Load() > seen+5 })
	require.Zero(t, resurrected.Load(), "the old endpoint never returned to a snapshot")
	list, err := b.h.Store().List(t.Context(), "echo")
	require.NoError(t, err)
	require.Len(t, list.Instances, 1)
	require.Equal(t, "http://127.0.0.2:9/", list.Instances[0].Endpoint)
	t.Logf("paused replica: epoch %d replaced by %d; %d snapshots after the replacement, none with %s", epoch, repl.Epoch, refreshes.Load(), old)
}
