package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// serveHTTPAgent starts, on addr, an agent that speaks the http agent protocol: it answers every
// turn with two deltas and done. It stops at cleanup.
func serveHTTPAgent(t *testing.T, addr string) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err, "listen on the agent's address")
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Text string `json:"text"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		_, _ = fmt.Fprintln(w, `{"type":"delta","text":"back "}`)
		_, _ = fmt.Fprintf(w, "{\"type\":\"delta\",\"text\":%q}\n", req.Text)
		_, _ = fmt.Fprintln(w, `{"type":"done"}`)
	})}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, srv.Shutdown(ctx))
		require.ErrorIs(t, <-served, http.ErrServerClosed)
	})
}

// postTurnDeadline posts a turn whose deadline (X-Deadline-Epoch-Ms) is deadline.
func postTurnDeadline(t *testing.T, base, session, text string, deadline time.Time) accepted {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"input": map[string]string{"text": text}})
	req, err := http.NewRequest(http.MethodPost, base+"/v1/sessions/"+session+"/turns", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Deadline-Epoch-Ms", strconv.FormatInt(deadline.UnixMilli(), 10))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	require.Equal(t, http.StatusAccepted, resp.StatusCode, string(b))
	var a accepted
	require.NoError(t, json.Unmarshal(b, &a))
	return a
}

// deadLetterReason is the turn's dead_letter_reason, "" when it was not dead-lettered.
func deadLetterReason(t *testing.T, env *testenv.Env, turnID string) string {
	t.Helper()
	var reason *string
	require.NoError(t, env.Pool.QueryRow(context.Background(), `SELECT dead_letter_reason FROM turns WHERE turn_id = $1`, turnID).Scan(&reason))
	if reason == nil {
		return ""
	}
	return *reason
}

// metric returns the value of the sample of a metric family on the /metrics page at addr whose
// labels include label, "" when there is none.
func metric(t *testing.T, addr, name, label string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, name+"{") && strings.Contains(line, label) {
			f := strings.Fields(line)
			return f[len(f)-1]
		}
	}
	return ""
}

// ended says whether the turn's row is terminal.
func ended(r turnRow) bool {
	switch r.Status {
	case "succeeded", "failed", "cancelled", "expired":
		return true
	}
	return false
}

// waitings returns the turn.waiting events of turnID in evs.
func waitings(evs []streamEvent, turnID string) []streamEvent {
	var out []streamEvent
	for _, e := range evs {
		if e.Type == "turn.waiting" && e.TurnID == turnID {
			out = append(out, e)
		}
	}
	return out
}

// TestAgentOutage runs the worker's http agent against an endpoint that refuses connections, as
// the outside run of issue 43 did (there a turn with a 10-minute deadline failed, dead-lettered,
// 0.65 s after its claim). An unreachable upstream is a wait, not a verdict: the turn waits within
// its deadline, its stream says why, and it fails only when its deadline leaves no useful time.
func TestAgentOutage(t *testing.T) {
	t.Run("TurnWaitsUntilTheAgentIsBack", func(t *testing.T) {
		addr := testenv.FreeAddr(t)
		env := testenv.New(t, testenv.Options{Partitions: 1})
		env.Config.Agent = "http"
		env.Config.Agents.HTTPAgentURL = "http://" + addr + "/turn"
		stack := startStack(t, env, "intake,worker")
		session := "outage-" + env.ID
		a := postTurnDeadline(t, "http://"+stack.Addr(), session, "hello", time.Now().Add(10*time.Minute))

		// The turn meets the refused endpoint: its stream says that it waits, and why, as the wait
		// begins and again at the 2nd and 4th try, not at every try.
		var row turnRow
		testenv.WaitFor(t, 60*time.Second, "turn.waiting for upstream_unavailable at its 4th try, or the turn's end", func() bool {
			row = readTurn(t, env, a.TurnID)
			for _, w := range waitings(readStream(t, env, session), a.TurnID) {
				if w.Data["reason"] == "upstream_unavailable" && w.Data["tries"] == 4.0 {
					return true
				}
			}
			return ended(row)
		})
		require.Equal(t, "running", row.Status, "the turn ended while its agent was unreachable: %s (attempt %d, dead letter %q)",
			row.Error, row.Attempt, deadLetterReason(t, env, a.TurnID))
		first := waitings(readStream(t, env, session), a.TurnID)[0]
		require.Equal(t, "upstream_unavailable", first.Data["reason"], "turn.waiting: %v", first.Data)
		require.Contains(t, first.Data["error"], "connection refused")
		require.NotEmpty(t, first.Data["retry_at"], "the event names the next try")
		pauses, err := strconv.ParseFloat(metric(t, stack.Addr(), "turnstile_worker_upstream_waits_total", `reason="upstream_unavailable"`), 64)
		require.NoError(t, err)
		require.GreaterOrEqual(t, pauses, 4.0, "the pause after each failed try is counted")

		// The agent comes up on the endpoint the worker keeps trying: the turn completes.
		serveHTTPAgent(t, addr)
		testenv.WaitFor(t, 60*time.Second, "the turn to end", func() bool {
			row = readTurn(t, env, a.TurnID)
			return ended(row)
		})
		require.Equal(t, "succeeded", row.Status, row.Error)
		require.Equal(t, 1, row.Attempt, "the wait spent no attempt")
		require.Empty(t, deadLetterReason(t, env, a.TurnID))
		waitTerminalEvents(t, env, session, a.TurnID) // Postgres records the end a moment before it is published

		var kinds []string
		var text strings.Builder
		for _, e := range readStream(t, env, session) {
			if e.TurnID != a.TurnID {
				continue
			}
			if len(kinds) == 0 || kinds[len(kinds)-1] != e.Type {
				kinds = append(kinds, e.Type)
			}
			if e.Type == "turn.delta" {
				fmt.Fprint(&text, e.Data["text"])
			}
		}
		require.Equal(t, []string{"turn.started", "turn.waiting", "turn.delta", "turn.completed"}, kinds)
		require.Equal(t, "back hello", text.String())
		var tries []float64
		for _, w := range waitings(readStream(t, env, session), a.TurnID) {
			require.Equal(t, "upstream_unavailable", w.Data["reason"])
			tries = append(tries, w.Data["tries"].(float64))
		}
		t.Logf("turn.waiting announced at tries %v", tries)
		require.Equal(t, []float64{1, 2, 4}, tries[:3], "announced at the 1st, 2nd and 4th try, not the 3rd")
		for i := 3; i < len(tries); i++ {
			require.Equal(t, 2*tries[i-1], tries[i], "then at every doubling")
		}
		require.Equal(t, "0", metric(t, stack.Addr(), "turnstile_worker_upstream_turns_waiting", `reason="upstream_unavailable"`))
	})

	t.Run("TurnFailsAtItsDeadline", func(t *testing.T) {
		addr := testenv.FreeAddr(t)
		env := testenv.New(t, testenv.Options{Partitions: 1})
		env.Config.Agent = "http"
		env.Config.Agents.HTTPAgentURL = "http://" + addr + "/turn"
		stack := startStack(t, env, "intake,worker")
		session := "outage-" + env.ID
		deadline := time.Now().Add(5 * time.Second).Truncate(time.Millisecond)
		a := postTurnDeadline(t, "http://"+stack.Addr(), session, "hello", deadline)

		var row turnRow
		testenv.WaitFor(t, 60*time.Second, "the turn to end", func() bool {
			row = readTurn(t, env, a.TurnID)
			return ended(row)
		})
		require.Equal(t, "failed", row.Status)
		require.NotNil(t, row.FinishedAt)
		// The last try is made when the deadline leaves the minimum useful time, not before, and
		// the turn ends with it rather than hanging on.
		lastTry := deadline.Add(-env.Config.MinUsefulTime)
		t.Logf("finished %v after the deadline, %d ms after the last useful try: %s",
			row.FinishedAt.Sub(deadline).Round(time.Millisecond), row.FinishedAt.Sub(lastTry).Milliseconds(), row.Error)
		require.False(t, row.FinishedAt.Before(lastTry), "failed %v before the deadline left the minimum useful time (%v)",
			lastTry.Sub(*row.FinishedAt).Round(time.Millisecond), env.Config.MinUsefulTime)
		require.True(t, row.FinishedAt.Before(deadline.Add(10*time.Second)), "failed %v after the deadline", row.FinishedAt.Sub(deadline))
		require.Contains(t, row.Error, "upstream_unavailable")
		require.Contains(t, row.Error, "connection refused")
		require.Empty(t, deadLetterReason(t, env, a.TurnID), "a turn its deadline ended is not poison")
		waitTerminalEvents(t, env, session, a.TurnID)

		evs := readStream(t, env, session)
		ws := waitings(evs, a.TurnID)
		require.NotEmpty(t, ws)
		require.Equal(t, "upstream_unavailable", ws[0].Data["reason"])
		last := evs[len(evs)-1]
		require.Equal(t, "turn.failed", last.Type)
		require.Contains(t, last.Data["error"], "upstream_unavailable")
	})
}
