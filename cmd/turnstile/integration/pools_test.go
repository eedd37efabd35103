package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// TestUpstreamPoolAffinity runs the worker with the HTTP agent over two replicas named by
// TURNSTILE_AGENT_ENDPOINTS: every turn succeeds, every request carries the session's route key,
// each session's turns all reach one replica, and both replicas get sessions.
func TestUpstreamPoolAffinity(t *testing.T) {
	t.Parallel()
	const sessions, turns = 12, 3
	var mu sync.Mutex
	seen := map[string]map[string]int{} // route key → replica → requests
	replica := func(name string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			key := r.Header.Get("X-Turnstile-Route-Key")
			mu.Lock()
			if seen[key] == nil {
				seen[key] = map[string]int{}
			}
			seen[key][name]++
			mu.Unlock()
			w.Header().Set("Content-Type", "application/x-ndjson")
			_, _ = fmt.Fprintln(w, `{"type":"delta","text":"from `+name+`"}`)
			_, _ = fmt.Fprintln(w, `{"type":"done"}`)
		}))
		t.Cleanup(srv.Close)
		return srv.URL + "/agent"
	}
	env := testenv.New(t, testenv.Options{Partitions: 4})
	env.Config.Agent = "http"
	env.Config.Agents.AgentEndpoints = replica("a") + "," + replica("b")
	stack := startStack(t, env, "intake,worker")
	base := "http://" + stack.Addr()
	for k := range turns {
		for i := range sessions {
			postTurn(t, base, fmt.Sprintf("pool-%s-%d", env.ID, i), fmt.Sprintf("turn %d", k))
		}
	}
	testenv.WaitFor(t, 60*time.Second, "every turn succeeded", func() bool {
		var n int
		require.NoError(t, env.Pool.QueryRow(context.Background(), `SELECT count(*) FROM turns WHERE status = 'succeeded'`).Scan(&n))
		return n == sessions*turns
	})
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, seen, sessions, "one route key per session, none empty: %v", seen)
	used := map[string]bool{}
	for key, by := range seen {
		require.Regexp(t, `^default/pool-`, key)
		require.Len(t, by, 1, "session %s stays on one replica: %v", key, by)
		for name, n := range by {
			require.Equal(t, turns, n)
			used[name] = true
		}
	}
	require.Len(t, used, 2, "both replicas get sessions")
}
