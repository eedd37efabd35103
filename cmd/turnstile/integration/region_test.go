package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/pkg/region"
	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// twoRegions is the region map of the region tests; the stack under test is euw1.
const twoRegions = `{"regions":[{"code":"euw1","url":"http://127.0.0.1:18080"},{"code":"use1","url":"http://127.0.0.1:28080"}],
 "default_home":"euw1"}`

// inRegion makes cfg region euw1 of twoRegions.
func inRegion(cfg config.Config) config.Config {
	cfg.Region.Code = "euw1"
	cfg.Region.Map = twoRegions
	return cfg
}

// startRegionStack starts roles as region euw1 of twoRegions and returns its base URL.
func startRegionStack(t *testing.T, roles string) (*testenv.Env, string) {
	t.Helper()
	env := testenv.New(t, testenv.Options{Partitions: 2})
	cfg := env.Config
	cfg.Roles = roles
	cfg.HTTPAddr = testenv.FreeAddr(t)
	startStackCfg(t, env, inRegion(cfg))
	return env, "http://" + cfg.HTTPAddr
}

// requireMinted checks that id is "euw1-<uuid>".
func requireMinted(t *testing.T, id string) {
	t.Helper()
	code, _, err := region.ParseUUID(id)
	require.NoError(t, err, id)
	require.Equal(t, "euw1", code, id)
}

// requireMisdirected checks a 421 problem naming use1.
func requireMisdirected(t *testing.T, method, url string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(`{"input":{"text":"x"}}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusMisdirectedRequest, resp.StatusCode, "%s %s", method, url)
	require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
	var p map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&p))
	require.Equal(t, httpx.ProblemMisdirected.URI(), p["type"])
	require.Equal(t, "use1", p[region.MemberRegion])
}

// TestRegionNative: with TURNSTILE_REGION=euw1, turns posted to a server-minted session and to a
// client-chosen one round-trip through the native API with prefixed IDs — the 202, the events
// (streamed and resumed), get, list and cancel — and another region's IDs are answered 421.
func TestRegionNative(t *testing.T) {
	t.Parallel()
	_, base := startRegionStack(t, "intake,worker,gateway")

	resp, err := http.Post(base+"/v1/sessions", "application/json", nil)
	require.NoError(t, err)
	var minted struct {
		SessionID string `json:"session_id"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&minted))
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	requireMinted(t, minted.SessionID)

	for _, session := range []string{minted.SessionID, "client-chosen-" + testenv.RandomHex(4)} {
		a := postTurn(t, base, session, "hello from euw1")
		requireMinted(t, a.TurnID)
		require.Equal(t, "/v1/sessions/"+session+"/events?turn_id="+a.TurnID, a.StreamURL)
		stream := testenv.OpenSSE(t, base+a.StreamURL, "")
		got := stream.Until(t, 30*time.Second, countCompleted(1))
		stream.Close()
		require.Equal(t, expectedEvents(a.TurnID, "hello from euw1"), describe(t, got), "events carry the prefixed ID")
		resumed := testenv.OpenSSE(t, base+a.StreamURL, got[0].ID)
		rest := resumed.Until(t, 10*time.Second, func(e testenv.Event) bool { return e.ID == got[len(got)-1].ID })
		resumed.Close()
		require.Equal(t, describe(t, got[1:]), describe(t, rest), "a resumed stream continues with no gap")

		var turn struct {
			TurnID string `json:"turn_id"`
			Status string `json:"status"`
		}
		require.Equal(t, http.StatusOK, getJSON(t, base+"/v1/turns/"+a.TurnID, &turn))
		require.Equal(t, a.TurnID, turn.TurnID)
		require.Equal(t, "succeeded", turn.Status)
		var page struct {
			Turns []struct {
				TurnID string `json:"turn_id"`
			} `json:"turns"`
		}
		require.Equal(t, http.StatusOK, getJSON(t, base+"/v1/sessions/"+session+"/turns", &page))
		require.Len(t, page.Turns, 1)
		require.Equal(t, a.TurnID, page.Turns[0].TurnID)
	}

	t.Run("Cancel", func(t *testing.T) {
		body := `{"input":{"text":"long"},"metadata":{"demo":{"tokens":50,"duration_ms":20000}}}`
		resp, err := http.Post(base+"/v1/sessions/cancel-me/turns", "application/json", strings.NewReader(body))
		require.NoError(t, err)
		var a accepted
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&a))
		resp.Body.Close()
		requireMinted(t, a.TurnID)
		stream := testenv.OpenSSE(t, base+a.StreamURL, "")
		defer stream.Close()
		stream.Until(t, 30*time.Second, func(e testenv.Event) bool { return e.Type == "turn.delta" })
		resp, err = http.Post(base+"/v1/turns/"+a.TurnID+"/cancel", "application/json", nil)
		require.NoError(t, err)
		var c struct {
			TurnID string `json:"turn_id"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&c))
		resp.Body.Close()
		require.Equal(t, http.StatusAccepted, resp.StatusCode)
		require.Equal(t, a.TurnID, c.TurnID)
		evs := stream.Until(t, 30*time.Second, func(e testenv.Event) bool { return e.Type == "turn.cancelled" })
		require.Equal(t, "turn.cancelled "+a.TurnID, describe(t, evs[len(evs)-1:])[0])
	})

	t.Run("OtherRegionIs421", func(t *testing.T) {
		other := "use1-" + uuid.Must(uuid.NewV7()).String()
		requireMisdirected(t, http.MethodGet, base+"/v1/turns/"+other)
		requireMisdirected(t, http.MethodPost, base+"/v1/turns/"+other+"/cancel")
		requireMisdirected(t, http.MethodPost, base+"/v1/sessions/"+other+"/turns")
		requireMisdirected(t, http.MethodGet, base+"/v1/sessions/"+other+"/turns")
		requireMisdirected(t, http.MethodGet, base+"/v1/sessions/s1/events?turn_id="+other)
		requireMisdirected(t, http.MethodGet, base+"/v1/sessions/"+other+"/events")
	})
}

// TestRegionA2A: with TURNSTILE_REGION=euw1, the official a2a-go client sends, streams, gets and
// cancels tasks whose task and context IDs carry the prefix; another region's task is refused
// with 421 and JSON-RPC error -32051 naming use1.
func TestRegionA2A(t *testing.T) {
	t.Parallel()
	env, base := startRegionStack(t, "intake,worker,gateway,a2a")
	s := &a2aStack{env: env, base: base}
	c := s.client(t, "", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	task := taskResult(t)(c.SendMessage(ctx, &a2a.MessageSendParams{Message: a2aMessage("blocking please", nil)}))
	require.Equal(t, a2a.TaskStateCompleted, task.Status.State)
	requireMinted(t, string(task.ID))
	requireMinted(t, task.ContextID)
	got, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID})
	require.NoError(t, err)
	require.Equal(t, task.ID, got.ID)
	require.Equal(t, task.ContextID, got.ContextID)

	evs := collect(t, c.SendStreamingMessage(ctx, &a2a.MessageSendParams{
		Message: a2aMessage("stream it", map[string]any{"demo": map[string]any{"tokens": 6}}),
	}), nil)
	require.Equal(t, []a2a.TaskState{a2a.TaskStateCompleted}, finalStates(evs))
	first, ok := evs[0].(*a2a.Task)
	require.True(t, ok, "%T", evs[0])
	requireMinted(t, string(first.ID))
	for _, ev := range evs {
		require.Equal(t, first.ID, ev.TaskInfo().TaskID)
	}

	long := taskResult(t)(c.SendMessage(ctx, &a2a.MessageSendParams{
		Message: a2aMessage("long", map[string]any{"demo": map[string]any{"tokens": 40, "duration_ms": 20000}}),
		Config:  &a2a.MessageSendConfig{Blocking: ptr(false)},
	}))
	requireMinted(t, string(long.ID))
	cancelled, err := c.CancelTask(ctx, &a2a.TaskIDParams{ID: long.ID})
	require.NoError(t, err)
	require.Equal(t, long.ID, cancelled.ID)
	require.Equal(t, a2a.TaskStateCanceled, cancelled.Status.State)

	other := a2a.TaskID("use1-" + uuid.Must(uuid.NewV7()).String())
	_, err = c.GetTask(ctx, &a2a.TaskQueryParams{ID: other})
	require.ErrorContains(t, err, "421")
	req, err := http.NewRequest(http.MethodPost, s.base+"/a2a",
		strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"`+string(other)+`"}}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusMisdirectedRequest, resp.StatusCode)
	var rpc struct {
		Error struct {
			Code int            `json:"code"`
			Data map[string]any `json:"data"`
		} `json:"error"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&rpc))
	require.Equal(t, region.RPCMisdirected, rpc.Error.Code)
	require.Equal(t, "use1", rpc.Error.Data[region.MemberRegion])
}

// TestRegionA2APush: in region euw1 a task's push notifications show its prefixed ID, and a
// follow-up message (whose turn names the task by that prefixed ID) notifies the same task's
// configs, per task in order.
func TestRegionA2APush(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 2})
	cfg := env.Config
	cfg.Roles = "intake,worker,gateway,a2a,notifier"
	cfg.HTTPAddr = testenv.FreeAddr(t)
	cfg.Notifier.AllowHTTP = true
	cfg.Notifier.AllowNetworks = "127.0.0.0/8"
	cfg.Notifier.Poll = 20 * time.Millisecond
	startStackCfg(t, env, inRegion(cfg))
	s := &a2aStack{env: env, base: "http://" + cfg.HTTPAddr}
	c := s.client(t, "", nil)
	recv := newTaskReceiver(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	task := taskResult(t)(c.SendMessage(ctx, &a2a.MessageSendParams{
		Message: a2aMessage("book a table", map[string]any{"demo": map[string]any{"end_state": "input-required", "tokens": 3}}),
		Config:  &a2a.MessageSendConfig{PushConfig: &a2a.PushConfig{ID: "r", URL: recv.srv.URL + "/r", Token: "tok-r"}},
	}))
	requireMinted(t, string(task.ID))
	require.Equal(t, a2a.TaskStateInputRequired, task.Status.State)
	got, err := c.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigParams{TaskID: task.ID, ConfigID: "r"})
	require.NoError(t, err)
	require.Equal(t, task.ID, got.TaskID)
	recv.await(t, "/r", endsWith(a2a.TaskStateInputRequired))

	follow := a2aMessage("for two", nil)
	follow.TaskID, follow.ContextID = task.ID, task.ContextID
	done := taskResult(t)(c.SendMessage(ctx, &a2a.MessageSendParams{Message: follow}))
	require.Equal(t, a2a.TaskStateCompleted, done.Status.State)
	pushes := recv.await(t, "/r", endsWith(a2a.TaskStateCompleted))
	require.Equal(t, []a2a.TaskState{a2a.TaskStateWorking, a2a.TaskStateInputRequired, a2a.TaskStateWorking, a2a.TaskStateCompleted},
		states(pushes), "the follow-up's changes reach the task's config")
	for _, p := range pushes {
		require.Equal(t, task.ID, p.Task.ID, "every push shows the prefixed task ID")
		require.Equal(t, task.ContextID, p.Task.ContextID)
		require.Equal(t, "tok-r", p.Token)
	}
	recv.mu.Lock()
	defer recv.mu.Unlock()
	require.Empty(t, recv.bad)
}
