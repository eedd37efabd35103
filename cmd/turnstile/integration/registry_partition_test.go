package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/registry"
	"github.com/turnstile-run/turnstile/pkg/registry/client"
	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// zoneReplica is an HTTP agent replica (the http adapter's NDJSON answer) at a fixed address that
// a partition cuts off in one of two ways: its listener and connections close (a worker's connect
// is refused; healing listens on the same address again), or, while drop is set, it accepts and
// closes every connection without an answer (as a middlebox on a cut path may).
type zoneReplica struct {
	addr string
	zone string
	hits atomic.Int64
	drop atomic.Bool

	mu   sync.Mutex
	srv  *http.Server
	done chan struct{}
}

func newZoneReplica(t *testing.T, zone string) *zoneReplica {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	r := &zoneReplica{addr: ln.Addr().String(), zone: zone}
	r.serve(ln)
	t.Cleanup(r.cut)
	return r
}

func (r *zoneReplica) endpoint() string { return "http://" + r.addr + "/agent" }

func (r *zoneReplica) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	_, _ = io.Copy(io.Discard, req.Body)
	if r.drop.Load() {
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				_ = c.Close()
				return
			}
		}
	}
	if req.Method != http.MethodPost {
		_, _ = io.WriteString(w, "ok")
		return
	}
	r.hits.Add(1)
	w.Header().Set("Content-Type", "application/x-ndjson")
	_, _ = fmt.Fprintln(w, `{"type":"delta","text":"ok"}`)
	_, _ = fmt.Fprintln(w, `{"type":"done"}`)
}

// serve answers on ln until cut; the goroutine is the replica's, ended and waited for by cut.
func (r *zoneReplica) serve(ln net.Listener) {
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	r.mu.Lock()
	r.srv, r.done = srv, done
	r.mu.Unlock()
}

// cut closes the listener and every connection. Safe twice.
func (r *zoneReplica) cut() {
	r.mu.Lock()
	srv, done := r.srv, r.done
	r.srv, r.done = nil, nil
	r.mu.Unlock()
	if srv == nil {
		return
	}
	_ = srv.Close()
	<-done
}

// heal listens on the replica's address again.
func (r *zoneReplica) heal(t *testing.T) {
	t.Helper()
	var ln net.Listener
	testenv.WaitFor(t, 10*time.Second, "the replica's address is free again", func() bool {
		var err error
		ln, err = net.Listen("tcp", r.addr)
		return err == nil
	})
	r.serve(ln)
}

// zoneLink is a zone's network path to the registry: while cut, a keeper's requests fail as if
// their packets were dropped, so its renewals stop without the keeper stopping.
type zoneLink struct {
	cut  atomic.Bool
	next http.RoundTripper
}

var errPartitioned = errors.New("zone partitioned from the registry")

func (z *zoneLink) RoundTrip(req *http.Request) (*http.Response, error) {
	if z.cut.Load() {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, fmt.Errorf("dial tcp %s: %w", req.URL.Host, errPartitioned)
	}
	return z.next.RoundTrip(req)
}

// turnStatuses counts the turns of ids by status.
func turnStatuses(t *testing.T, env *testenv.Env, ids []string) map[string]int {
	t.Helper()
	rows, err := env.Pool.Query(context.Background(), `SELECT status, count(*) FROM turns WHERE turn_id = ANY($1::uuid[]) GROUP BY status`, ids)
	require.NoError(t, err)
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		require.NoError(t, rows.Scan(&s, &n))
		out[s] = n
	}
	require.NoError(t, rows.Err())
	return out
}

// runTurns posts n turns of fresh sessions and waits until every one has ended; it returns their
// IDs and how many succeeded.
func runTurns(t *testing.T, env *testenv.Env, base, tag string, n int) ([]string, int) {
	t.Helper()
	ids := make([]string, 0, n)
	for i := range n {
		ids = append(ids, postTurn(t, base, fmt.Sprintf("%s-%d-%s", tag, i, env.ID), "hello").TurnID)
	}
	var st map[string]int
	testenv.WaitFor(t, 120*time.Second, tag+" turns ended", func() bool {
		st = turnStatuses(t, env, ids)
		return st["succeeded"]+st["failed"]+st["cancelled"]+st["expired"] == n
	})
	return ids, st["succeeded"]
}

// registryState is the registry's view of the agent's registrations in Postgres: by instance ID,
// the epoch and state.
func registryState(t *testing.T, env *testenv.Env) map[string]registry.Instance {
	t.Helper()
	rows, err := env.Pool.Query(context.Background(), `SELECT instance_id, epoch, state, zone FROM agent_instances WHERE agent = 'agent'`)
	require.NoError(t, err)
	defer rows.Close()
	out := map[string]registry.Instance{}
	for rows.Next() {
		var in registry.Instance
		require.NoError(t, rows.Scan(&in.InstanceID, &in.Epoch, &in.State, &in.Zone))
		out[in.InstanceID] = in
	}
	require.NoError(t, rows.Err())
	return out
}

// TestRegistryZonePartition is seed 002's worked example scaled down: 120 replicas of an agent
// register across zones a, b and c; zone c is partitioned (its 40 replicas cannot renew, and the
// worker cannot reach them: half refuse connections, half drop them). The sweeper's guard freezes
// their expiries instead of deleting them and its metric fires; the worker keeps routing every turn
// to the 80 replicas it can reach, ejecting the c endpoints its requests failed on and failing over
// to others, and no accepted turn fails. When the partition
// heals, c's replicas renew with their old epochs: no registration is repeated.
func TestRegistryZonePartition(t *testing.T) {
	t.Parallel()
	const perZone = 40
	zones := []string{"a", "b", "c"}
	env := testenv.New(t, testenv.Options{Partitions: 2})
	addr := testenv.FreeAddr(t)
	base := "http://" + addr
	lease, heartbeat := 6*time.Second, time.Second
	env.Config.HTTPAddr = addr
	env.Config.Agent = "http"
	env.Config.Agents.AgentEndpoints = "registry"
	env.Config.Agents.AgentEjectFailures = 1
	env.Config.Registry.URL = base
	env.Config.Registry.Lease = lease
	env.Config.Registry.SweepInterval = 200 * time.Millisecond
	env.Config.Registry.Refresh = 200 * time.Millisecond
	env.Config.Registry.MaxInflight = 128
	env.Config.Registry.SnapshotDir = t.TempDir()

	replicas := make([]*zoneReplica, 0, perZone*len(zones))
	for _, z := range zones {
		for range perZone {
			replicas = append(replicas, newZoneReplica(t, z))
		}
	}
	stack := startStack(t, env, "intake,worker")
	require.Equal(t, addr, stack.Addr())

	// One link per zone; the keepers share a transport that keeps a connection per keeper.
	transport := &http.Transport{MaxIdleConnsPerHost: len(replicas), IdleConnTimeout: time.Minute}
	defer transport.CloseIdleConnections()
	links := map[string]*zoneLink{}
	for _, z := range zones {
		links[z] = &zoneLink{next: transport}
	}
	var registered atomic.Int64
	var healed atomic.Bool
	var renewedAfterHeal atomic.Int64
	renewedBy := make([]atomic.Bool, len(replicas))
	keepers := make([]*client.Keeper, len(replicas))
	for i, r := range replicas {
		k, err := client.New(client.Config{
			URL: base, Agent: "agent", Heartbeat: heartbeat, NoDeregister: true, Log: env.Log,
			HTTP: &http.Client{Transport: links[r.zone]},
			Registration: registry.Registration{
				InstanceID: fmt.Sprintf("agent-%s-%02d", r.zone, i%perZone), Endpoint: r.endpoint(), Zone: r.zone,
			},
			Hooks: client.Hooks{
				Registered: func(registry.Lease) { registered.Add(1) },
				Renewed: func(registry.Lease) {
					if healed.Load() && r.zone == "c" && !renewedBy[i].Swap(true) {
						renewedAfterHeal.Add(1)
					}
				},
			},
		})
		require.NoError(t, err)
		require.NoError(t, k.Start(t.Context()))
		keepers[i] = k
		t.Cleanup(func() { _ = k.Stop(context.Background()) })
	}
	testenv.WaitFor(t, 60*time.Second, "every replica registered", func() bool { return registered.Load() == int64(len(replicas)) })
	testenv.WaitFor(t, 60*time.Second, "the worker's pool holds every replica", func() bool {
		v, _ := metricValue(t, base, "turnstile_worker_upstream_endpoints", `agent="agent"`)
		return v == float64(len(replicas))
	})
	before := registryState(t, env)
	require.Len(t, before, len(replicas))

	// Before the partition every zone serves.
	_, ok := runTurns(t, env, base, "warm", 60)
	require.Equal(t, 60, ok, "every warm-up turn succeeded")

	// The partition: zone c's keepers cannot reach the registry, and nothing reaches zone c:
	// half its replicas refuse connections, the other half drop them unanswered.
	hitsBefore := map[string]int64{}
	for _, r := range replicas {
		hitsBefore[r.zone] += r.hits.Load()
	}
	links["c"].cut.Store(true)
	for i, r := range replicas {
		switch {
		case r.zone != "c":
		case i%2 == 0:
			r.cut()
		default:
			r.drop.Store(true)
		}
	}
	cutAt := time.Now()
	// Turns keep coming while the c leases run out; each batch is waited for before the next.
	var partitionTurns, partitionOK, batches int
	frozen := func() bool {
		n := 0
		for _, in := range registryState(t, env) {
			if in.Zone == "c" && in.State == registry.StateFrozen {
				n++
			}
		}
		return n == perZone
	}
	for deadline := time.Now().Add(120 * time.Second); ; {
		ids, ok := runTurns(t, env, base, fmt.Sprintf("cut%d", batches), 120)
		partitionTurns += len(ids)
		partitionOK += ok
		batches++
		if frozen() {
			break
		}
		require.True(t, time.Now().Before(deadline), "zone c's registrations were not frozen within 120s of the partition")
	}
	frozenAfter := time.Since(cutAt)
	// While frozen, the worker's snapshot still names zone c: its turns route around it.
	ids, ok := runTurns(t, env, base, "frozen", 60)
	partitionTurns += len(ids)
	partitionOK += ok

	// Deletions froze, and the alert's metric fired.
	state := registryState(t, env)
	require.Len(t, state, len(replicas), "no registration was deleted")
	for id, in := range state {
		want := registry.StateLive
		if in.Zone == "c" {
			want = registry.StateFrozen
		}
		require.Equal(t, want, in.State, id)
		require.Equal(t, before[id].Epoch, in.Epoch, id)
	}
	// The sweep sets its metrics just after its transaction commits.
	testenv.WaitFor(t, 30*time.Second, "the guard's metric fires", func() bool {
		v, _ := metricValue(t, base, "turnstile_registry_expiry_guard_active", `agent="agent"`)
		return v == 1
	})
	trips, _ := metricValue(t, base, "turnstile_registry_expiry_guard_trips_total", `agent="agent"`)
	require.Positive(t, trips)
	expired, _ := metricValue(t, base, "turnstile_registry_expired_total")
	require.Zero(t, expired, "the sweeper removed no registration")

	// No accepted turn failed: the worker routed every one to the replicas it could reach, and
	// ejected the c endpoints its requests failed on.
	require.Equal(t, partitionTurns, partitionOK, "every turn accepted during the partition succeeded")
	hitsDuring := map[string]int64{}
	for _, r := range replicas {
		hitsDuring[r.zone] += r.hits.Load()
	}
	require.Zero(t, hitsDuring["c"]-hitsBefore["c"], "nothing reached zone c")
	require.GreaterOrEqual(t, hitsDuring["a"]+hitsDuring["b"]-hitsBefore["a"]-hitsBefore["b"], int64(partitionTurns),
		"the 80 reachable replicas served every turn")
	var failedOnC, ejectedC int
	for _, r := range replicas {
		if r.zone != "c" {
			continue
		}
		label := `endpoint="` + r.endpoint() + `"`
		failed := 0.0
		for _, outcome := range []string{"unavailable", "retryable"} {
			v, _ := metricValue(t, base, "turnstile_worker_upstream_endpoint_requests_total", label, `outcome="`+outcome+`"`)
			failed += v
		}
		ej, _ := metricValue(t, base, "turnstile_worker_upstream_endpoint_ejections_total", label)
		if failed > 0 {
			failedOnC++
			require.Positive(t, ej, "a c endpoint a request failed on is ejected locally: %s", r.endpoint())
		}
		if ej > 0 {
			ejectedC++
		}
	}
	require.Positive(t, failedOnC, "turns were routed to zone c and moved on")
	snapEndpoints, _ := metricValue(t, base, "turnstile_registry_snapshot_endpoints", `agent="agent"`)
	require.Equal(t, float64(len(replicas)), snapEndpoints, "the worker's snapshot kept the frozen registrations")
	t.Logf("partition: zone c frozen %s after the cut (lease %s); %d turns (%d batches of 120 until the freeze, 60 while frozen), all succeeded; %d c endpoints failed a request, %d ejected locally; guard trips %v",
		frozenAfter.Round(time.Millisecond), lease, partitionTurns, batches, failedOnC, ejectedC, trips)

	// The partition heals: zone c's replicas answer again and their keepers renew with the epochs
	// they hold.
	var regBefore int64
	for _, k := range keepers {
		regBefore += k.Stats().Registrations
	}
	reqsBefore, _ := metricValue(t, base, "turnstile_registry_requests_total")
	for i, r := range replicas {
		switch {
		case r.zone != "c":
		case i%2 == 0:
			r.heal(t)
		default:
			r.drop.Store(false)
		}
	}
	healAt := time.Now()
	healed.Store(true)
	links["c"].cut.Store(false)
	testenv.WaitFor(t, 60*time.Second, "every zone c replica renewed", func() bool { return renewedAfterHeal.Load() == perZone })
	testenv.WaitFor(t, 60*time.Second, "every registration is live again", func() bool {
		for _, in := range registryState(t, env) {
			if in.State != registry.StateLive {
				return false
			}
		}
		return true
	})
	recovery := time.Since(healAt)
	reqsAfter, _ := metricValue(t, base, "turnstile_registry_requests_total")
	var regAfter int64
	for _, k := range keepers {
		regAfter += k.Stats().Registrations
	}
	after := registryState(t, env)
	require.Len(t, after, len(replicas), "no new instance ID")
	for id, in := range after {
		require.Equal(t, before[id].Epoch, in.Epoch, "%s renewed with its old epoch", id)
	}
	require.Equal(t, regBefore, regAfter, "no registration was repeated")
	require.Equal(t, int64(len(replicas)), regAfter, "each replica registered once")
	testenv.WaitFor(t, 30*time.Second, "the guard's metric clears", func() bool {
		v, _ := metricValue(t, base, "turnstile_registry_expiry_guard_active", `agent="agent"`)
		return v == 0
	})
	reqs := reqsAfter - reqsBefore
	t.Logf("recovery: %d zone c replicas renewed their frozen registrations in %s with their old epochs; re-registrations %d; registry requests %.0f (%.0f/s)",
		perZone, recovery.Round(time.Millisecond), regAfter-regBefore, reqs, reqs/recovery.Seconds())
	_, ok = runTurns(t, env, base, "healed", 60)
	require.Equal(t, 60, ok, "every turn after the partition succeeded")
}
