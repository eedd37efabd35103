package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// TestDeadlinesCrossFrontDoors: a caller's X-Deadline-Epoch-Ms becomes the turn's deadline through
// the A2A and LangGraph front doors, as it does on the native API and the AI SDK door, and a
// malformed one is refused in each protocol's words before anything is queued.
func TestDeadlinesCrossFrontDoors(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	stack := startStack(t, env, "intake,worker,gateway,a2a,langgraph")
	base := "http://" + stack.Addr()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	deadline := time.Now().Add(7 * time.Minute).Truncate(time.Millisecond)

	post := func(path, dl string, body any) (int, map[string]any) {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, bytes.NewReader(b))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		if dl != "" {
			req.Header.Set("X-Deadline-Epoch-Ms", dl)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer func() { _ = resp.Body.Close() }()
		var out map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		return resp.StatusCode, out
	}
	ms := strconv.FormatInt(deadline.UnixMilli(), 10)
	a2aSend := func(dl, id string) (int, map[string]any) {
		return post("/a2a", dl, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": map[string]any{
			"message":       map[string]any{"messageId": id, "role": "user", "parts": []any{map[string]any{"kind": "text", "text": "hi"}}},
			"configuration": map[string]any{"blocking": false},
		}})
	}
	turnDeadline := func(turnID string) time.Time {
		var dl *time.Time
		require.Eventually(t, func() bool {
			err := env.Pool.QueryRow(ctx, `SELECT deadline FROM turns WHERE turn_id = $1`, turnID).Scan(&dl)
			return err == nil && dl != nil
		}, 30*time.Second, 20*time.Millisecond, "turn %s was claimed", turnID)
		return *dl
	}

	t.Run("A2A", func(t *testing.T) {
		status, out := a2aSend(ms, "dl-m1")
		require.Equal(t, http.StatusOK, status)
		task, ok := out["result"].(map[string]any)
		require.True(t, ok, "%v", out)
		require.True(t, deadline.Equal(turnDeadline(task["id"].(string))), "the caller's deadline is the turn's")

		_, out = a2aSend("soon", "dl-m2")
		require.EqualValues(t, -32602, out["error"].(map[string]any)["code"], "%v", out)
	})

	t.Run("LangGraph", func(t *testing.T) {
		status, thread := post("/threads", "", map[string]any{})
		require.Equal(t, http.StatusOK, status, "%v", thread)
		path := "/threads/" + thread["thread_id"].(string) + "/runs"
		input := map[string]any{"assistant_id": "agent", "input": map[string]any{"messages": []any{map[string]any{"type": "human", "content": "hi"}}}}
		status, run := post(path, ms, input)
		require.Equal(t, http.StatusOK, status, "%v", run)
		require.True(t, deadline.Equal(turnDeadline(run["run_id"].(string))), "the caller's deadline is the turn's")

		status, refused := post(path, "-5", input)
		require.Equal(t, http.StatusBadRequest, status)
		require.Contains(t, refused["type"], "invalid-deadline")
	})
}
