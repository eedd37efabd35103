package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// gatedAgent is an http-protocol agent replica whose answers wait for the test's gate; it counts
// requests and the most it held at once, and shares an in-flight count with its sibling replicas.
type gatedAgent struct {
	*httptest.Server
	gate     chan struct{}
	mu       sync.Mutex
	requests int
	active   int
	peak     int
	shared   *sharedCount
}

type sharedCount struct {
	mu           sync.Mutex
	active, peak int
}

func (s *sharedCount) add(d int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.active += d
	s.peak = max(s.peak, s.active)
}

func newGatedAgent(t *testing.T, shared *sharedCount) *gatedAgent {
	g := &gatedAgent{gate: make(chan struct{}), shared: shared}
	g.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		g.mu.Lock()
		g.requests++
		g.active++
		g.peak = max(g.peak, g.active)
		g.mu.Unlock()
		shared.add(1)
		defer func() {
			shared.add(-1)
			g.mu.Lock()
			g.active--
			g.mu.Unlock()
		}()
		select {
		case <-g.gate:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		_, _ = fmt.Fprintln(w, `{"type":"delta","text":"done"}`)
		_, _ = fmt.Fprintln(w, `{"type":"done"}`)
	}))
	t.Cleanup(g.Close)
	return g
}

func (g *gatedAgent) counts() (requests, active, peak int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.requests, g.active, g.peak
}

// TestManyAgentsLiveReload changes a running installation's agents file and sees the worker apply
// what it can without a restart (README, "Many agents"): an agent's in-flight limit raised from 1
// to 3 and its endpoint moved from replica A to replica B take effect while a turn still runs on
// A (pinned there, it finishes there); an agent's max_attempts raised from 1 to 2 lets a turn that
// fails its first attempt succeed on its second, where before it failed.
func TestManyAgentsLiveReload(t *testing.T) {
	t.Parallel()
	var shared sharedCount
	a, b := newGatedAgent(t, &shared), newGatedAgent(t, &shared)
	env := testenv.New(t, testenv.Options{Partitions: 2})
	file := filepath.Join(t.TempDir(), "agents.yaml")
	catalog := func(inFlight int, endpoint string, maxAttempts int) []byte {
		return fmt.Appendf(nil, `
default: helper
agents:
  - {name: helper, adapter: http, http: {url: %q}, limits: {in_flight: %d}}
  - {name: scratch, adapter: demo, limits: {max_attempts: %d}}
`, endpoint, inFlight, maxAttempts)
	}
	require.NoError(t, os.WriteFile(file, catalog(1, a.URL, 1), 0o600))
	cfg := env.Config
	cfg.Roles = "intake,worker"
	cfg.AgentsFile, cfg.WorkerAgents = file, "helper,scratch"
	cfg.AgentsReloadInterval = 50 * time.Millisecond
	cfg.DemoDelay = time.Millisecond
	cfg.DemoFaults = "allow"
	stack := startStackCfg(t, env, cfg)
	base := "http://" + stack.Addr()
	ctx := context.Background()
	status := func(id uuid.UUID) (st string, attempt int) {
		require.NoError(t, env.Pool.QueryRow(ctx, `SELECT status, attempt FROM turns WHERE turn_id = $1`, id).Scan(&st, &attempt))
		return st, attempt
	}
	waitStatus := func(id uuid.UUID, want string) int {
		var attempt int
		testenv.WaitFor(t, 60*time.Second, "turn "+id.String()+" "+want, func() bool {
			var st string
			st, attempt = status(id)
			return st == want
		})
		return attempt
	}
	post := func(session, agent string, metadata map[string]any) uuid.UUID {
		body := map[string]any{"input": map[string]string{"text": "hi"}, "agent": agent}
		if metadata != nil {
			body["metadata"] = metadata
		}
		return uuid.MustParse(postTurnWith(t, base, session, body))
	}

	// A turn of scratch that fails its first attempt fails for good under max_attempts 1.
	failing := map[string]any{"demo": map[string]any{"fail_attempts": 1}}
	require.Equal(t, 1, waitStatus(post("live-fail-1", "scratch", failing), "failed"))

	var ids []uuid.UUID
	for i := range 4 {
		ids = append(ids, post(fmt.Sprintf("live-%d", i), "helper", nil))
	}
	testenv.WaitFor(t, 30*time.Second, "one turn running on replica A", func() bool {
		_, active, _ := a.counts()
		return active == 1
	})

	// Raise the in-flight limit, move the endpoint to B, allow two attempts.
	require.NoError(t, os.WriteFile(file, catalog(3, b.URL, 2), 0o600))
	testenv.WaitFor(t, 30*time.Second, "two more turns running on replica B", func() bool {
		_, active, _ := b.counts()
		return active == 2
	})
	require.Equal(t, 2, waitStatus(post("live-fail-2", "scratch", failing), "succeeded"),
		"a raised max_attempts lets the second attempt run")

	close(a.gate) // A's pinned turn finishes there; the fourth takes its slot, on B
	testenv.WaitFor(t, 30*time.Second, "the fourth turn running on B", func() bool {
		requests, _, _ := b.counts()
		return requests == 3
	})
	close(b.gate)
	for _, id := range ids {
		waitStatus(id, "succeeded")
	}
	aReq, _, aPeak := a.counts()
	bReq, _, bPeak := b.counts()
	shared.mu.Lock()
	peak := shared.peak
	shared.mu.Unlock()
	t.Logf("replica A: %d requests (peak %d); replica B: %d requests (peak %d); peak in flight %d", aReq, aPeak, bReq, bPeak, peak)
	require.Equal(t, 1, aReq, "nothing went to A after the reload")
	require.Equal(t, 3, peak, "the raised in-flight limit, and no more")
}
