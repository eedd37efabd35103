package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/registry"
	"github.com/turnstile-run/turnstile/pkg/registry/snapshot"
	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// replicaServer is an HTTP agent replica (the http adapter's NDJSON answer); while down it drops
// every connection, as an unreachable replica looks to the workers.
type replicaServer struct {
	srv  *httptest.Server
	down atomic.Bool
	hits atomic.Int64
}

func newReplica(t *testing.T) *replicaServer {
	t.Helper()
	r := &replicaServer{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		if r.down.Load() {
			if hj, ok := w.(http.Hijacker); ok {
				if c, _, err := hj.Hijack(); err == nil {
					_ = c.Close()
					return
				}
			}
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		r.hits.Add(1)
		w.Header().Set("Content-Type", "application/x-ndjson")
		_, _ = fmt.Fprintln(w, `{"type":"delta","text":"ok"}`)
		_, _ = fmt.Fprintln(w, `{"type":"done"}`)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// metricValue scrapes base's /metrics for the sum of the series of name whose labels contain
// every one of match.
func metricValue(t *testing.T, base, name string, match ...string) (float64, bool) {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var sum float64
	found := false
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for _, m := range match {
			ok = ok && strings.Contains(line, m)
		}
		if !ok {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		require.NoError(t, err)
		sum += v
		found = true
	}
	return sum, found
}

// TestRegistryColdStartFromDisk: a worker started while the registry cannot be reached routes
// turns from its disk snapshot, and the staleness metric shows the snapshot's age.
func TestRegistryColdStartFromDisk(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 2})
	r := newReplica(t)
	dir := t.TempDir()
	age := 90 * time.Second
	snap := snapshot.Snapshot{Agent: "agent", Revision: 7, Fetched: time.Now().Add(-age), Instances: []registry.Instance{
		{InstanceID: "agent-0", Endpoint: r.srv.URL + "/agent", Zone: "a", Epoch: 3, State: registry.StateLive, Revision: 7},
	}}
	raw, err := json.Marshal(snap)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "agent.json"), raw, 0o600))
	env.Config.Agent = "http"
	env.Config.Agents.AgentEndpoints = "registry"
	env.Config.Registry.URL = "http://" + testenv.FreeAddr(t) // nothing listens there
	env.Config.Registry.SnapshotDir = dir
	stack := startStack(t, env, "intake,worker")
	base := "http://" + stack.Addr()
	a := postTurn(t, base, "cold-"+env.ID, "hello")
	testenv.WaitFor(t, 60*time.Second, "the turn succeeded", func() bool {
		var st string
		_ = env.Pool.QueryRow(context.Background(), `SELECT status FROM turns WHERE turn_id = $1`, a.TurnID).Scan(&st)
		return st == "succeeded"
	})
	require.Positive(t, r.hits.Load(), "the turn went to the endpoint of the disk snapshot")
	v, ok := metricValue(t, base, "turnstile_registry_snapshot_age_seconds", `agent="agent"`)
	require.True(t, ok)
	require.GreaterOrEqual(t, v, age.Seconds())
	errs, _ := metricValue(t, base, "turnstile_registry_snapshot_refreshes_total", `result="error"`)
	require.Positive(t, errs, "the registry was unreachable")
	t.Logf("cold start from disk: turn served, snapshot age %.1fs, %v failed refreshes", v, errs)
}
