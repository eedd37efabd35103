package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// TestSaturatedUpstreamBacklogWaitsInKafka runs the worker with the HTTP agent against an upstream
// that refuses with 429 above capacity concurrent calls. Turns beyond the adaptive limit wait inside
// the worker holding their in-flight slots, so the consumer stops fetching: while the upstream is
// saturated at most MaxInflight turns have been claimed beyond those finished, the rest of the
// backlog is still in Kafka, and in the end every turn succeeds on its first attempt.
func TestSaturatedUpstreamBacklogWaitsInKafka(t *testing.T) {
	const capacity, inflight, turns = 2, 4, 24
	var active, refused atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if active.Add(1) > capacity {
			active.Add(-1)
			refused.Add(1)
			http.Error(w, "over capacity", http.StatusTooManyRequests)
			return
		}
		defer active.Add(-1)
		w.Header().Set("Content-Type", "application/x-ndjson")
		select { // the upstream's work for one turn
		case <-r.Context().Done():
			return
		case <-time.After(150 * time.Millisecond):
		}
		_, _ = fmt.Fprintln(w, `{"type":"delta","text":"done"}`)
		_, _ = fmt.Fprintln(w, `{"type":"done"}`)
	}))
	defer srv.Close()

	env := testenv.New(t, testenv.Options{Partitions: 4})
	env.Config.Agent = "http"
	env.Config.Agents.HTTPAgentURL = srv.URL
	env.Config.Agents.UpstreamInitialLimit = 4
	env.Config.MaxInflight = inflight
	stack := startStack(t, env, "intake,worker")
	base := "http://" + stack.Addr()
	for i := range turns {
		postTurn(t, base, fmt.Sprintf("sat-%s-%d", env.ID, i), "hi")
	}

	count := func(where string) int {
		var n int
		require.NoError(t, env.Pool.QueryRow(context.Background(), `SELECT count(*) FROM turns WHERE `+where).Scan(&n))
		return n
	}
	sawBacklog := false
	testenv.WaitFor(t, 60*time.Second, "every turn succeeded", func() bool {
		running, claimed := count(`status = 'running'`), count(`true`)
		require.LessOrEqual(t, running, inflight, "no more turns run than the worker's in-flight slots")
		// Fetched records are at most the running ones plus a buffer of MaxInflight; the others are
		// still in Kafka.
		if refused.Load() > 0 && active.Load() == capacity && turns-claimed > inflight {
			sawBacklog = true
		}
		return count(`status = 'succeeded'`) == turns
	})
	require.True(t, sawBacklog, "while the upstream was saturated, part of the backlog stayed in Kafka")
	require.Zero(t, count(`attempt <> 1`), "no turn failed an attempt because of the upstream's refusals")
	t.Logf("refusals: %d", refused.Load())
}
