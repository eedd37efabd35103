package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/agents"
	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/registry"
	"github.com/turnstile-run/turnstile/pkg/testenv"
)

type bundle struct {
	env     *testenv.Env
	srv     *httptest.Server
	h       *Handler
	sweeper *Sweeper
	reg     *prometheus.Registry
	sweeps  chan []AgentCount
}

func catalog(t *testing.T) *agents.Catalog {
	t.Helper()
	c, err := agents.Parse([]byte("agents:\n  - {name: echo, adapter: a2a, a2a: {url: 'http://127.0.0.1:1/'}}\n  - {name: other, adapter: demo}\n"), config.Default())
	require.NoError(t, err)
	return c
}

func setup(t *testing.T, cfg Config) *bundle {
	t.Helper()
	env := testenv.New(t, testenv.Options{Partitions: 1})
	cat := catalog(t)
	cfg.Agents = func() *agents.Catalog { return cat }
	b := &bundle{env: env, reg: prometheus.NewRegistry(), sweeps: make(chan []AgentCount, 16)}
	b.h = New(cfg, Deps{Pool: env.Pool, Log: env.Log, Registry: b.reg})
	b.sweeper = NewSweeper(SweepConfig{Interval: time.Hour, OnSweep: func(c []AgentCount, ran bool, err error) {
		if err != nil || !ran {
			t.Errorf("sweep: ran %v, err %v", ran, err)
		}
		b.sweeps <- c
	}}, b.h.Store(), env.Log, b.reg)
	r := chi.NewRouter()
	b.h.Routes(r)
	b.srv = httptest.NewServer(r)
	t.Cleanup(b.srv.Close)
	return b
}

type answer struct {
	status int
	header http.Header
	body   map[string]any
}

func (b *bundle) do(t *testing.T, method, path string, ifMatch string, body any) answer {
	t.Helper()
	var rd io.Reader
	if body != nil {
		switch v := body.(type) {
		case string:
			rd = bytes.NewBufferString(v)
		default:
			raw, err := json.Marshal(v)
			require.NoError(t, err)
			rd = bytes.NewReader(raw)
		}
	}
	req, err := http.NewRequestWithContext(t.Context(), method, b.srv.URL+path, rd)
	require.NoError(t, err)
	if ifMatch != "" {
		req.Header.Set("If-Match", ifMatch)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	a := answer{status: resp.StatusCode, header: resp.Header}
	raw, _ := io.ReadAll(resp.Body)
	if len(raw) > 0 {
		require.NoError(t, json.Unmarshal(raw, &a.body), string(raw))
	}
	if resp.StatusCode >= 400 {
		require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
	}
	return a
}

func (b *bundle) register(t *testing.T, id, endpoint, zone string) registry.Lease {
	t.Helper()
	a := b.do(t, http.MethodPost, "/v1/agents/echo/instances", "", registry.Registration{InstanceID: id, Endpoint: endpoint, Zone: zone})
	require.Equal(t, http.StatusCreated, a.status, a.body)
	return registry.Lease{InstanceID: a.body["instance_id"].(string), Epoch: int64(a.body["epoch"].(float64))}
}

// expire moves the leases of the given instances into the past, as if their holders had
// stopped renewing a lease ago.
func (b *bundle) expire(t *testing.T, ids ...string) {
	t.Helper()
	tag, err := b.env.Pool.Exec(t.Context(), `UPDATE agent_instances SET lease_expires_at = now() - interval '1 second'
		WHERE agent = 'echo' AND instance_id = ANY($1)`, ids)
	require.NoError(t, err)
	require.EqualValues(t, len(ids), tag.RowsAffected())
}

func (b *bundle) sweep(t *testing.T) map[string]AgentCount {
	t.Helper()
	b.sweeper.Sweep(t.Context())
	out := map[string]AgentCount{}
	for _, c := range <-b.sweeps {
		out[c.Agent] = c
	}
	return out
}

func ifMatch(epoch int64) string { return fmt.Sprintf(`"%d"`, epoch) }

func TestRegistry(t *testing.T) {
	t.Parallel()

	t.Run("Defaults", func(t *testing.T) {
		t.Parallel()
		h := New(Config{}, Deps{})
		require.Equal(t, config.RegistryLeaseDefault, h.cfg.Lease)
		require.Equal(t, config.RegistryMaxInflightDefault, h.cfg.MaxInflight)
		require.Equal(t, StoreTimeoutDefault, h.cfg.StoreTimeout)
		s := NewSweeper(SweepConfig{}, nil, nil, nil)
		require.InDelta(t, 0.15, s.cfg.GuardShare, 1e-9)
		require.Equal(t, config.RegistrySweepIntervalDefault, s.cfg.Interval)
	})

	t.Run("RegisterRenewDeregister", func(t *testing.T) {
		t.Parallel()
		b := setup(t, Config{})
		l := b.register(t, "", "http://10.0.0.1:9000/", "a")
		require.NotEmpty(t, l.InstanceID)
		path := "/v1/agents/echo/instances/" + l.InstanceID

		a := b.do(t, http.MethodPut, path, ifMatch(l.Epoch), nil)
		require.Equal(t, http.StatusOK, a.status, a.body)
		require.InDelta(t, 10, a.body["heartbeat_seconds"], 0.01)

		a = b.do(t, http.MethodPut, path, ifMatch(l.Epoch+1), nil)
		require.Equal(t, http.StatusPreconditionFailed, a.status)
		require.Contains(t, a.body["type"], "stale-epoch")
		a = b.do(t, http.MethodPut, path, "", nil)
		require.Equal(t, http.StatusPreconditionRequired, a.status)
		require.Contains(t, a.body["type"], "epoch-required")

		a = b.do(t, http.MethodGet, "/v1/agents/echo/instances", "", nil)
		require.Equal(t, http.StatusOK, a.status)
		ins := a.body["instances"].([]any)
		require.Len(t, ins, 1)
		in := ins[0].(map[string]any)
		require.Equal(t, "live", in["state"])
		require.Equal(t, "a", in["zone"])
		require.EqualValues(t, l.Epoch, in["epoch"])
		require.NotEmpty(t, in["renewed_at"])
		rev := int64(a.body["revision"].(float64))

		a = b.do(t, http.MethodDelete, path, ifMatch(l.Epoch), nil)
		require.Equal(t, http.StatusNoContent, a.status)
		a = b.do(t, http.MethodPut, path, ifMatch(l.Epoch), nil)
		require.Equal(t, http.StatusPreconditionFailed, a.status, "a removed registration is not renewed")

		a = b.do(t, http.MethodGet, fmt.Sprintf("/v1/agents/echo/instances/changes?since=%d", rev), "", nil)
		require.Equal(t, http.StatusOK, a.status)
		require.Equal(t, false, a.body["reset"])
		ch := a.body["instances"].([]any)
		require.Len(t, ch, 1)
		require.Equal(t, "deleted", ch[0].(map[string]any)["state"], "a removal is a change readers learn of")
	})

	t.Run("BadInput", func(t *testing.T) {
		t.Parallel()
		b := setup(t, Config{})
		for name, c := range map[string]struct {
			path   string
			body   any
			status int
			typ    string
		}{
			"NotJSON":      {"/v1/agents/echo/instances", "{", 400, "invalid-body"},
			"UnknownField": {"/v1/agents/echo/instances", `{"endpoint":"http://x/","color":"red"}`, 400, "invalid-body"},
			"BadEndpoint":  {"/v1/agents/echo/instances", registry.Registration{Endpoint: "ftp://x/"}, 422, "validation-failed"},
			"BadZone":      {"/v1/agents/echo/instances", registry.Registration{Endpoint: "http://x/", Zone: "a b"}, 422, "validation-failed"},
			"BadID":        {"/v1/agents/echo/instances", registry.Registration{Endpoint: "http://x/", InstanceID: "a/b"}, 422, "validation-failed"},
			"UnknownAgent": {"/v1/agents/nope/instances", registry.Registration{Endpoint: "http://x/"}, 404, "agent-not-found"},
		} {
			a := b.do(t, http.MethodPost, c.path, "", c.body)
			require.Equal(t, c.status, a.status, name)
			require.Contains(t, a.body["type"], c.typ, name)
		}
		a := b.do(t, http.MethodGet, "/v1/agents/echo/instances/changes?since=-1", "", nil)
		require.Equal(t, 400, a.status)
	})

	// A replacement takes an expired instance ID over with a higher epoch; the replaced holder's
	// renewal is then refused, and its registration again (at its old endpoint) is too.
	t.Run("Fencing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, Config{})
		old := b.register(t, "echo-0", "http://10.0.0.1:9000/", "a")
		a := b.do(t, http.MethodPost, "/v1/agents/echo/instances", "", registry.Registration{InstanceID: "echo-0", Endpoint: "http://10.0.0.2:9000/"})
		require.Equal(t, http.StatusConflict, a.status, "a live registration keeps its ID")
		require.Contains(t, a.body["type"], "instance-taken")
		b.expire(t, "echo-0")
		repl := b.register(t, "echo-0", "http://10.0.0.2:9000/", "a")
		require.Greater(t, repl.Epoch, old.Epoch)
		a = b.do(t, http.MethodPut, "/v1/agents/echo/instances/echo-0", ifMatch(old.Epoch), nil)
		require.Equal(t, http.StatusPreconditionFailed, a.status)
		a = b.do(t, http.MethodPost, "/v1/agents/echo/instances", "", registry.Registration{InstanceID: "echo-0", Endpoint: "http://10.0.0.1:9000/"})
		require.Equal(t, http.StatusConflict, a.status)
		list, err := b.h.Store().List(t.Context(), "echo")
		require.NoError(t, err)
		require.Len(t, list.Instances, 1)
		require.Equal(t, "http://10.0.0.2:9000/", list.Instances[0].Endpoint)
	})

	// Seed 002's guard: a sweep removes expiries within the share, freezes a storm, and frozen
	// registrations renew with their old epochs.
	t.Run("ExpiryGuard", func(t *testing.T) {
		t.Parallel()
		b := setup(t, Config{})
		leases := make([]registry.Lease, 20)
		ids := make([]string, 20)
		for i := range leases {
			ids[i] = fmt.Sprintf("echo-%02d", i)
			leases[i] = b.register(t, ids[i], fmt.Sprintf("http://10.0.0.%d:9000/", i+1), "a")
		}
		b.expire(t, ids[:2]...) // 10%: routine churn
		c := b.sweep(t)["echo"]
		require.False(t, c.Held)
		require.ElementsMatch(t, ids[:2], c.Removed)
		require.InDelta(t, 0, testutil.ToFloat64(b.sweeper.m.guard.WithLabelValues("echo")), 0)

		b.expire(t, ids[2:8]...) // 6 of 18: a storm
		c = b.sweep(t)["echo"]
		require.True(t, c.Held)
		require.Empty(t, c.Removed)
		require.InDelta(t, 1, testutil.ToFloat64(b.sweeper.m.guard.WithLabelValues("echo")), 0)
		require.InDelta(t, 1, testutil.ToFloat64(b.sweeper.m.trips.WithLabelValues("echo")), 0)
		list, err := b.h.Store().List(t.Context(), "echo")
		require.NoError(t, err)
		require.Equal(t, 6, list.Counts["frozen"])
		require.Equal(t, 12, list.Counts["live"])

		// The partition heals: the first renewals bring the expired share back within the guard
		// before the last ones arrive.
		renew := func(i int) {
			t.Helper()
			a := b.do(t, http.MethodPut, "/v1/agents/echo/instances/"+ids[i], ifMatch(leases[i].Epoch), nil)
			require.Equal(t, http.StatusOK, a.status, "a frozen registration renews with its epoch")
		}
		for i := 2; i < 7; i++ {
			renew(i)
		}
		c = b.sweep(t)["echo"]
		require.False(t, c.Held, "1 of 18 expired, and the 2 removals of the window: within the guard")
		require.Empty(t, c.Removed, "the registration still frozen is not removed")
		require.Equal(t, []string{ids[7]}, c.Thawed, "it gets one more lease")
		require.InDelta(t, 0, testutil.ToFloat64(b.sweeper.m.guard.WithLabelValues("echo")), 0)
		list, err = b.h.Store().List(t.Context(), "echo")
		require.NoError(t, err)
		require.Equal(t, 18, list.Counts["live"])
		renew(7) // the tail of the heal renews with its old epoch: no registration again
		c = b.sweep(t)["echo"]
		require.False(t, c.Held)
		require.Empty(t, c.Removed)
		require.Empty(t, c.Thawed)

		// A frozen one that did die stays silent through its extra lease, and is removed after it.
		b.expire(t, ids[2:8]...)
		require.True(t, b.sweep(t)["echo"].Held)
		for i := 2; i < 7; i++ {
			renew(i)
		}
		c = b.sweep(t)["echo"]
		require.Equal(t, []string{ids[7]}, c.Thawed)
		b.expire(t, ids[7])
		c = b.sweep(t)["echo"]
		require.False(t, c.Held)
		require.Equal(t, []string{ids[7]}, c.Removed)
		list, err = b.h.Store().List(t.Context(), "echo")
		require.NoError(t, err)
		require.Equal(t, 17, list.Counts["live"])
	})

	t.Run("ChangesFollowRevisions", func(t *testing.T) {
		t.Parallel()
		b := setup(t, Config{})
		ctx := t.Context()
		b.register(t, "echo-0", "http://10.0.0.1:9000/", "a")
		ch, err := b.h.Store().Changes(ctx, "echo", 0)
		require.NoError(t, err)
		require.True(t, ch.Reset, "revision 0 is no snapshot: the whole set")
		require.Len(t, ch.Instances, 1)
		b.register(t, "echo-2", "http://10.0.0.3:9000/", "c")
		l1 := b.register(t, "echo-1", "http://10.0.0.2:9000/", "b")
		ch2, err := b.h.Store().Changes(ctx, "echo", ch.Revision)
		require.NoError(t, err)
		require.False(t, ch2.Reset)
		require.Len(t, ch2.Instances, 2, "only what changed since")
		// A renewal of a live registration is no change.
		a := b.do(t, http.MethodPut, "/v1/agents/echo/instances/echo-1", ifMatch(l1.Epoch), nil)
		require.Equal(t, http.StatusOK, a.status)
		ch3, err := b.h.Store().Changes(ctx, "echo", ch2.Revision)
		require.NoError(t, err)
		require.Empty(t, ch3.Instances)
		// A reader behind the purged tombstones, or ahead of the store, reloads.
		_, err = b.env.Pool.Exec(ctx, `UPDATE registry_head SET compacted = revision`)
		require.NoError(t, err)
		ch4, err := b.h.Store().Changes(ctx, "echo", ch.Revision)
		require.NoError(t, err)
		require.True(t, ch4.Reset)
		require.Len(t, ch4.Instances, 3)
		ch5, err := b.h.Store().Changes(ctx, "echo", ch2.Revision+1000)
		require.NoError(t, err)
		require.True(t, ch5.Reset)
	})

	// Admission: renewals use the whole limit, registrations and reads half; a request beyond is
	// refused at once.
	t.Run("Admission", func(t *testing.T) {
		t.Parallel()
		a := admission{max: 4, low: 2}
		require.True(t, a.enter(classLow))
		require.True(t, a.enter(classLow))
		require.False(t, a.enter(classLow), "registrations stop at half")
		require.True(t, a.enter(classHigh))
		require.True(t, a.enter(classHigh))
		require.False(t, a.enter(classHigh))
		a.leave()
		require.False(t, a.enter(classLow))
		require.True(t, a.enter(classHigh))
	})

	t.Run("Shed", func(t *testing.T) {
		t.Parallel()
		b := setup(t, Config{MaxInflight: 2})
		b.h.adm.inflight.Store(1) // half of the limit is taken by requests in flight
		a := b.do(t, http.MethodPost, "/v1/agents/echo/instances", "", registry.Registration{Endpoint: "http://10.0.0.1:9000/"})
		require.Equal(t, http.StatusServiceUnavailable, a.status)
		require.Contains(t, a.body["type"], "over-capacity")
		require.NotEmpty(t, a.header.Get("Retry-After"))
		a = b.do(t, http.MethodPut, "/v1/agents/echo/instances/x", ifMatch(1), nil)
		require.Equal(t, http.StatusPreconditionFailed, a.status, "a renewal is still admitted")
		require.InDelta(t, 1, testutil.ToFloat64(b.h.m.requests.WithLabelValues("register", "shed")), 0)
		b.h.adm.inflight.Store(0)
	})
}

func TestSweeperSingleActive(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	tx, err := b.env.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	var locked bool
	require.NoError(t, tx.QueryRow(ctx, stmt("sweep_lock")).Scan(&locked))
	require.True(t, locked)
	_, ran, err := b.h.Store().Sweep(ctx, 0.15, 0, time.Minute, time.Hour, nil)
	require.NoError(t, err)
	require.False(t, ran, "a second sweeper skips while one holds the lock")
	require.NoError(t, tx.Rollback(ctx))
	_, ran, err = b.h.Store().Sweep(ctx, 0.15, 0, time.Minute, time.Hour, nil)
	require.NoError(t, err)
	require.True(t, ran)
}
