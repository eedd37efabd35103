package integration

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// TestFrontDoorPriority: A2A, LangGraph and the AI SDK have no priority field, so a turn's
// priority travels in the metadata their clients send (README, "Priority"): each door's turn gets
// the priority its metadata names, and a bad one is refused by the door, in its protocol, before
// anything reaches Kafka.
func TestFrontDoorPriority(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 1})
	cfg := env.Config
	cfg.Roles = "intake,worker,gateway,a2a,langgraph,aisdk"
	cfg.DemoDelay = time.Millisecond
	stack := startStackCfg(t, env, cfg)
	base := "http://" + stack.Addr()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	priorities := func() map[int]int {
		rows, err := env.Pool.Query(ctx, `SELECT coalesce(priority, -1), count(*) FROM turns GROUP BY 1`)
		require.NoError(t, err)
		defer rows.Close()
		out := map[int]int{}
		for rows.Next() {
			var p, n int
			require.NoError(t, rows.Scan(&p, &n))
			out[p] = n
		}
		require.NoError(t, rows.Err())
		return out
	}

	// A2A, with the official client: the message's metadata.
	card, err := agentcard.DefaultResolver.Resolve(ctx, base)
	require.NoError(t, err)
	c, err := a2aclient.NewFromCard(ctx, card)
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Destroy()) }()
	task := taskResult(t)(c.SendMessage(ctx, &a2a.MessageSendParams{
		Message: a2aMessage("urgent", map[string]any{"priority": 9}), Config: &a2a.MessageSendConfig{Blocking: ptr(true)},
	}))
	require.Equal(t, a2a.TaskStateCompleted, task.Status.State)
	_, err = c.SendMessage(ctx, &a2a.MessageSendParams{Message: a2aMessage("too urgent", map[string]any{"priority": 12})})
	require.ErrorIs(t, err, a2a.ErrInvalidParams, "a priority out of range is the client's error")
	require.Equal(t, map[int]int{9: 1}, priorities())

	// LangGraph: the run's metadata.
	call := func(path, body string) (int, string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	status, body := call("/runs/wait", `{"assistant_id":"agent","input":{"messages":[{"type":"human","content":"low"}]},"metadata":{"priority":1}}`)
	require.Equal(t, http.StatusOK, status, body)
	status, body = call("/runs/wait", `{"assistant_id":"agent","input":{"messages":[{"type":"human","content":"bad"}]},"metadata":{"priority":"high"}}`)
	require.GreaterOrEqual(t, status, 400, body)
	require.Less(t, status, 500, body)
	require.Equal(t, map[int]int{9: 1, 1: 1}, priorities())

	// The AI SDK's chat: the request's metadata.
	parts := postChat(t, base, "prio-"+testenv.RandomHex(4), "middle", map[string]any{"priority": 7})
	for p := parts.next(); p != nil; p = parts.next() {
		require.NotEqual(t, "error", p["type"], "the chat's stream: %v", p)
	}
	require.Equal(t, map[int]int{9: 1, 1: 1, 7: 1}, priorities())
}
