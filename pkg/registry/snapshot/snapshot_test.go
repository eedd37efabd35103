package snapshot

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/turnstile-run/turnstile/pkg/registry"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"))
}

// fakeRegistry serves the changes feed of one agent from memory, as the intake's store does:
// every change takes the next revision, removals stay as tombstones.
type fakeRegistry struct {
	mu     sync.Mutex
	rev    int64
	rows   map[string]registry.Instance
	down   bool
	sinces []int64
}

func (f *fakeRegistry) put(id, endpoint string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rev++
	f.rows[id] = registry.Instance{InstanceID: id, Endpoint: endpoint, State: registry.StateLive, Revision: f.rev, Epoch: f.rev}
}

func (f *fakeRegistry) remove(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rev++
	in := f.rows[id]
	in.State, in.Revision = registry.StateDeleted, f.rev
	f.rows[id] = in
}

func (f *fakeRegistry) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	since, _ := strconv.ParseInt(r.URL.Query().Get("since"), 10, 64)
	f.sinces = append(f.sinces, since)
	out := registry.Changes{Agent: "echo", Revision: f.rev, Reset: since == 0, Instances: []registry.Instance{}}
	for _, in := range f.rows {
		if (since == 0 && in.State != registry.StateDeleted) || (since > 0 && in.Revision > since) {
			out.Instances = append(out.Instances, in)
		}
	}
	_ = json.NewEncoder(w).Encode(out)
}

func setup(t *testing.T, _ string) (*fakeRegistry, *httptest.Server) {
	t.Helper()
	fr := &fakeRegistry{rows: map[string]registry.Instance{}}
	srv := httptest.NewServer(fr)
	t.Cleanup(srv.Close)
	return fr, srv
}

func TestFollower(t *testing.T) {
	t.Parallel()

	t.Run("FollowsDeltas", func(t *testing.T) {
		t.Parallel()
		fr, srv := setup(t, "")
		fr.put("a", "http://10.0.0.1/")
		fr.put("b", "http://10.0.0.2/")
		f, err := New(Config{URL: srv.URL, Agent: "echo", Dir: t.TempDir()})
		require.NoError(t, err)
		require.ErrorIs(t, f.Check(), ErrNoSnapshot)
		require.NoError(t, f.Refresh(t.Context()))
		require.Equal(t, []string{"http://10.0.0.1/", "http://10.0.0.2/"}, f.Current().Endpoints())
		select {
		case <-f.Changes():
		default:
			t.Fatal("a changed snapshot is signalled")
		}
		fr.remove("a")
		fr.put("c", "http://10.0.0.3/")
		require.NoError(t, f.Refresh(t.Context()))
		require.Equal(t, []string{"http://10.0.0.2/", "http://10.0.0.3/"}, f.Current().Endpoints())
		require.Equal(t, []int64{0, 2}, fr.sinces, "the second refresh asks for the changes since its revision")
		require.EqualValues(t, 4, f.Current().Revision)
	})

	// Invariant 17: a failed refresh never empties the snapshot; it is served stale with its age,
	// and only past the stale limit does it become an error.
	t.Run("OutageServesStale", func(t *testing.T) {
		t.Parallel()
		fr, srv := setup(t, "")
		fr.put("a", "http://10.0.0.1/")
		reg := prometheus.NewRegistry()
		f, err := New(Config{URL: srv.URL, Agent: "echo", StaleLimit: time.Hour, Metrics: NewMetrics(reg)})
		require.NoError(t, err)
		require.NoError(t, f.Refresh(t.Context()))
		fr.mu.Lock()
		fr.down = true
		fr.mu.Unlock()
		clock := time.Now()
		f.now = func() time.Time { return clock }
		require.Error(t, f.Refresh(t.Context()))
		eps, err := f.Resolve(t.Context())
		require.NoError(t, err)
		require.Equal(t, []string{"http://10.0.0.1/"}, eps)
		require.NoError(t, f.Check())
		require.InDelta(t, 1, testutil.ToFloat64(f.cfg.Metrics.refreshes.WithLabelValues("echo", "error")), 0)
		clock = clock.Add(2 * time.Hour)
		require.ErrorIs(t, f.Check(), ErrStale)
		_, err = f.Resolve(t.Context())
		require.ErrorIs(t, err, ErrStale)
		require.Equal(t, []string{"http://10.0.0.1/"}, f.Current().Endpoints(), "still held, never emptied")
	})

	// A follower made while the registry cannot be reached loads the disk copy of an earlier one,
	// and its age is the copy's.
	t.Run("ColdStartFromDisk", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		fr, srv := setup(t, dir)
		fr.put("a", "http://10.0.0.1/")
		fr.put("b", "http://10.0.0.2/")
		first, err := New(Config{URL: srv.URL, Agent: "echo", Dir: dir})
		require.NoError(t, err)
		require.NoError(t, first.Refresh(t.Context()))
		srv.Close()

		reg := prometheus.NewRegistry()
		second, err := New(Config{URL: srv.URL, Agent: "echo", Dir: dir, Metrics: NewMetrics(reg)})
		require.NoError(t, err)
		require.Error(t, second.Refresh(t.Context()), "the registry is down")
		eps, err := second.Resolve(t.Context())
		require.NoError(t, err)
		require.Equal(t, []string{"http://10.0.0.1/", "http://10.0.0.2/"}, eps)
		require.EqualValues(t, 2, second.Current().Revision)
		n, err := testutil.GatherAndCount(reg, "turnstile_registry_snapshot_age_seconds")
		require.NoError(t, err)
		require.Equal(t, 1, n)

		_, err = New(Config{URL: srv.URL, Agent: "other", Dir: dir})
		require.NoError(t, err, "another agent's follower has no copy and starts empty")
	})

	t.Run("StartStop", func(t *testing.T) {
		t.Parallel()
		fr, srv := setup(t, "")
		fr.put("a", "http://10.0.0.1/")
		got := make(chan error, 100)
		f, err := New(Config{URL: srv.URL, Agent: "echo", Refresh: 10 * time.Millisecond, OnRefresh: func(_ *Snapshot, err error) {
			select {
			case got <- err:
			default:
			}
		}})
		require.NoError(t, err)
		for range 3 {
			require.NoError(t, f.Start(t.Context()))
			select {
			case err := <-got:
				require.NoError(t, err)
			case <-time.After(10 * time.Second):
				t.Fatal("no refresh")
			}
			require.NoError(t, f.Stop(t.Context()))
			require.NoError(t, f.Stop(t.Context()))
		}
		require.False(t, errors.Is(f.Check(), ErrNoSnapshot))
	})
}

// BenchmarkResolve is what a turn's resolve costs from the snapshot (memory only) beside the
// static list's.
func BenchmarkResolve(b *testing.B) {
	ins := make([]registry.Instance, 120)
	for i := range ins {
		ins[i] = registry.Instance{InstanceID: strconv.Itoa(i), Endpoint: "http://10.0.0." + strconv.Itoa(i) + ":9000/"}
	}
	f := FromInstances("echo", 1, ins)
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		eps, err := f.Resolve(ctx)
		if err != nil || len(eps) != 120 {
			b.Fatal(err)
		}
	}
}
