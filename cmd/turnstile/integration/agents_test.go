package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/streams"
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
		// Intake records every accepted turn as queued; a worker's claim moves it on.
		running, claimed := count(`status = 'running'`), count(`status <> 'queued'`)
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

// TestTakeoverReusesPriorToolResult: the demo agent's first attempt publishes a tool call and its
// result, then fails. The second attempt receives them as Turn.Prior and republishes the earlier
// result instead of running the tool again; both attempts' tool calls carry the same idempotency key.
func TestTakeoverReusesPriorToolResult(t *testing.T) {
	env := testenv.New(t, testenv.Options{Partitions: 2})
	stack := startStack(t, env, "intake,worker")
	session := "prior-" + env.ID
	body, _ := json.Marshal(map[string]any{
		"input":    map[string]string{"text": "time?"},
		"metadata": map[string]any{"demo": map[string]any{"tool": true, "tokens": 2, "fail_after_tool_attempts": 1}},
	})
	resp, err := http.Post("http://"+stack.Addr()+"/v1/sessions/"+session+"/turns", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	var a accepted
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&a))
	resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)

	testenv.WaitFor(t, 60*time.Second, "the turn succeeded", func() bool {
		var status string
		err := env.Pool.QueryRow(context.Background(), `SELECT status FROM turns WHERE turn_id = $1`, a.TurnID).Scan(&status)
		return err == nil && status == "succeeded"
	})
	entries, err := streams.NewReader(env.Redis, env.Config.KeyPrefix).After(context.Background(), storeKey(session), streams.EntryID{}, 1000)
	require.NoError(t, err)
	var keys []string
	var results []map[string]any
	for _, e := range entries {
		var d struct {
			Attempt        int             `json:"attempt"`
			IdempotencyKey string          `json:"idempotency_key"`
			Result         json.RawMessage `json:"result"`
		}
		require.NoError(t, json.Unmarshal([]byte(e.Data), &d))
		switch e.Type {
		case "turn.tool_call":
			keys = append(keys, fmt.Sprintf("%d %s", d.Attempt, d.IdempotencyKey))
		case "turn.tool_result":
			var r map[string]any
			require.NoError(t, json.Unmarshal(d.Result, &r))
			r["published_by"] = d.Attempt
			results = append(results, r)
		}
	}
	require.Equal(t, []string{"1 " + a.TurnID + ":1", "2 " + a.TurnID + ":1"}, keys)
	require.Len(t, results, 2)
	require.EqualValues(t, 1, results[0]["attempt"])
	require.EqualValues(t, 2, results[1]["published_by"])
	require.EqualValues(t, 1, results[1]["attempt"], "attempt 2 reused the tool result of attempt 1")
}
