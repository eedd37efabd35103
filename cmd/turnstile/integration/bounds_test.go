package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/apikey"
	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/pkg/turnstore"
)

// TestA2APushConfigsBounded reproduces the run where one task accepted 150 push configs: with the
// default limit of config.PushConfigsMaxDefault per task, tasks/pushNotificationConfig/set beyond
// it is invalid params and stores nothing, the native PUT is a 409 push-configs-limit, many
// concurrent sets store exactly the limit, a config sent with a follow-up message to a full task
// is not stored, and get and list never show a config's token.
func TestA2APushConfigsBounded(t *testing.T) {
	s := startA2AStackWith(t, "intake,worker,gateway,a2a", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := s.client(t, s.keyA, nil)
	const most = config.PushConfigsMaxDefault
	count := func(task a2a.TaskID) int {
		var n int
		require.NoError(t, s.env.Pool.QueryRow(ctx, `SELECT count(*) FROM task_push_configs WHERE task_id = $1`, string(task)).Scan(&n))
		return n
	}
	newTask := func(md map[string]any) *a2a.Task {
		return taskResult(t)(c.SendMessage(ctx, &a2a.MessageSendParams{
			Message: a2aMessage("bounded", md),
			Config:  &a2a.MessageSendConfig{Blocking: ptr(false)},
		}))
	}

	t.Run("SetBeyondTheLimit", func(t *testing.T) {
		task := newTask(map[string]any{"demo": map[string]any{"tokens": 1}})
		for i := range most {
			_, err := c.SetTaskPushConfig(ctx, &a2a.TaskPushConfig{TaskID: task.ID, Config: a2a.PushConfig{
				ID: fmt.Sprintf("c%d", i), URL: "https://example.com/hook", Token: "secret-token",
			}})
			require.NoError(t, err, "config %d", i)
		}
		_, err := c.SetTaskPushConfig(ctx, &a2a.TaskPushConfig{TaskID: task.ID, Config: a2a.PushConfig{ID: "one-more", URL: "https://example.com/hook"}})
		require.ErrorIs(t, err, a2a.ErrInvalidParams, "a config beyond the limit")
		require.Contains(t, err.Error(), fmt.Sprintf("at most %d push configs", most))
		require.Equal(t, most, count(task.ID), "the refused config stored nothing")
		// Replacing one of them is not a new config.
		_, err = c.SetTaskPushConfig(ctx, &a2a.TaskPushConfig{TaskID: task.ID, Config: a2a.PushConfig{ID: "c0", URL: "https://example.com/other"}})
		require.NoError(t, err, "replacing a stored config at the limit")

		// The native route answers the same limit as a problem document.
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, s.base+"/v1/turns/"+string(task.ID)+"/push-configs/native-one",
			strings.NewReader(`{"url":"https://example.com/hook"}`))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+s.keyA)
		req.Header.Set("Content-Type", "application/json")
		resp, err := apiClient.Do(req)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusConflict, resp.StatusCode, "%s", b)
		require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
		require.Contains(t, string(b), `/push-configs-limit"`)
		require.Equal(t, most, count(task.ID))

		// Get and list never echo the token.
		got, err := c.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigParams{TaskID: task.ID, ConfigID: "c1"})
		require.NoError(t, err)
		require.Empty(t, got.Config.Token, "get does not echo the token")
		all, err := c.ListTaskPushConfig(ctx, &a2a.ListTaskPushConfigParams{TaskID: task.ID})
		require.NoError(t, err)
		require.Len(t, all, most)
		for _, pc := range all {
			require.Empty(t, pc.Config.Token, "list does not echo the token")
		}
		for _, path := range []string{"/push-configs", "/push-configs/c1"} {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/v1/turns/"+string(task.ID)+path, nil)
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer "+s.keyA)
			resp, err := apiClient.Do(req)
			require.NoError(t, err)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
			require.NotContains(t, string(b), "secret-token", "the native %s does not echo the token", path)
		}
	})

	t.Run("ConcurrentSets", func(t *testing.T) {
		task := newTask(map[string]any{"demo": map[string]any{"tokens": 1}})
		const tries = 40
		var wg sync.WaitGroup
		errs := make([]error, tries)
		for i := range tries {
			wg.Go(func() {
				_, errs[i] = c.SetTaskPushConfig(ctx, &a2a.TaskPushConfig{TaskID: task.ID, Config: a2a.PushConfig{
					ID: fmt.Sprintf("r%d", i), URL: "https://example.com/hook",
				}})
			})
		}
		wg.Wait()
		stored := 0
		for _, err := range errs {
			if err == nil {
				stored++
				continue
			}
			require.ErrorIs(t, err, a2a.ErrInvalidParams)
		}
		require.Equal(t, most, stored, "exactly the limit is accepted")
		require.Equal(t, most, count(task.ID), "exactly the limit is stored")
	})

	t.Run("FollowUpsWithConfigs", func(t *testing.T) {
		// Each follow-up of an input-required task carries a config of its own; the task keeps
		// at most the limit, however many follow-ups come.
		ask := map[string]any{"demo": map[string]any{"end_state": "input-required", "tokens": 1}}
		task := taskResult(t)(c.SendMessage(ctx, &a2a.MessageSendParams{Message: a2aMessage("ask", ask)}))
		require.Equal(t, a2a.TaskStateInputRequired, task.Status.State)
		for i := range most + 3 {
			follow := a2aMessage(fmt.Sprintf("follow-up %d", i), ask)
			follow.TaskID, follow.ContextID = task.ID, task.ContextID
			got, err := c.SendMessage(ctx, &a2a.MessageSendParams{Message: follow, Config: &a2a.MessageSendConfig{
				PushConfig: &a2a.PushConfig{URL: fmt.Sprintf("https://example.com/follow-%d", i)},
			}})
			require.NoError(t, err, "follow-up %d", i)
			b, _ := json.Marshal(got)
			require.Contains(t, string(b), `"input-required"`, "follow-up %d ran", i)
		}
		require.Equal(t, most, count(task.ID), "the configs of follow-ups past the limit are not stored")
	})
}

// TestLangGraphThreadsBounded reproduces the run where one tenant created 3,000 threads of 3 KB
// metadata with no quota, no delete route and no retention: a tenant's threads stop at
// TURNSTILE_LANGGRAPH_THREADS_MAX (409 threads-limit, concurrent creations included, other
// tenants unaffected), metadata past TURNSTILE_LANGGRAPH_METADATA_MAX is a 422 that stores
// nothing, DELETE /threads/{thread_id} frees a place (404 for another tenant's thread, 409 while
// a run is in flight), and retention removes threads idle past TURNSTILE_LANGGRAPH_THREAD_TTL
// but keeps a busy one.
func TestLangGraphThreadsBounded(t *testing.T) {
	env := testenv.New(t, testenv.Options{Partitions: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	keys := map[string]string{}
	for _, tenant := range []string{"acme", "globex", "initech"} {
		_, key, err := apikey.Create(ctx, env.Pool, tenant)
		require.NoError(t, err)
		keys[tenant] = key
	}
	const most = 5
	cfg := authConfig(env, "intake,worker,gateway,langgraph")
	cfg.HTTPAddr = testenv.FreeAddr(t)
	cfg.LangGraph.ThreadsMax = most
	cfg.LangGraph.MetadataMax = 1024
	startStackCfg(t, env, cfg)
	base := "http://" + cfg.HTTPAddr
	do := func(method, path, key, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("X-Api-Key", key)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	threadsOf := func(tenant string) int {
		var n int
		require.NoError(t, env.Pool.QueryRow(ctx, `SELECT count(*) FROM langgraph_threads WHERE tenant = $1`, tenant).Scan(&n))
		return n
	}
	create := func(key, body string) (int, string) { return do(http.MethodPost, "/threads", key, body) }
	threadID := func(body string) string {
		var th struct {
			ThreadID string `json:"thread_id"`
		}
		require.NoError(t, json.Unmarshal([]byte(body), &th))
		return th.ThreadID
	}

	t.Run("Quota", func(t *testing.T) {
		var ids []string
		for i := range most {
			status, body := create(keys["acme"], `{"metadata":{"n":`+fmt.Sprint(i)+`}}`)
			require.Equal(t, http.StatusOK, status, body)
			ids = append(ids, threadID(body))
		}
		status, body := create(keys["acme"], `{}`)
		require.Equal(t, http.StatusConflict, status, body)
		require.Contains(t, body, `/threads-limit"`)
		require.Equal(t, most, threadsOf("acme"))
		// An existing thread with if_exists=do_nothing is answered at the quota.
		status, body = create(keys["acme"], `{"thread_id":"`+ids[0]+`","if_exists":"do_nothing"}`)
		require.Equal(t, http.StatusOK, status, body)
		// Another tenant is not affected.
		status, body = create(keys["globex"], `{}`)
		require.Equal(t, http.StatusOK, status, body)

		// Delete frees a place; another tenant's delete is not found and deletes nothing.
		status, body = do(http.MethodDelete, "/threads/"+ids[0], keys["globex"], "")
		require.Equal(t, http.StatusNotFound, status, body)
		require.Equal(t, most, threadsOf("acme"))
		status, body = do(http.MethodDelete, "/threads/"+ids[0], keys["acme"], "")
		require.Equal(t, http.StatusNoContent, status, body)
		status, _ = do(http.MethodGet, "/threads/"+ids[0], keys["acme"], "")
		require.Equal(t, http.StatusNotFound, status)
		status, body = do(http.MethodDelete, "/threads/"+ids[0], keys["acme"], "")
		require.Equal(t, http.StatusNotFound, status, body)
		status, body = create(keys["acme"], `{}`)
		require.Equal(t, http.StatusOK, status, body)
	})

	t.Run("ConcurrentCreations", func(t *testing.T) {
		const tries = 30
		var wg sync.WaitGroup
		statuses := make([]int, tries)
		for i := range tries {
			wg.Go(func() { statuses[i], _ = create(keys["initech"], `{}`) })
		}
		wg.Wait()
		created := 0
		for _, s := range statuses {
			if s == http.StatusOK {
				created++
				continue
			}
			require.Equal(t, http.StatusConflict, s)
		}
		require.Equal(t, most, created)
		require.Equal(t, most, threadsOf("initech"))
	})

	t.Run("Metadata", func(t *testing.T) {
		before := threadsOf("globex")
		big := `{"metadata":{"blob":"` + strings.Repeat("x", 3000) + `"}}`
		status, body := create(keys["globex"], big)
		require.Equal(t, http.StatusUnprocessableEntity, status, body)
		require.Contains(t, body, `/validation-failed"`)
		require.Contains(t, body, "1024 bytes")
		require.Equal(t, before, threadsOf("globex"), "nothing stored")
	})

	t.Run("DeleteBusyAndRetention", func(t *testing.T) {
		status, body := create(keys["globex"], `{}`)
		require.Equal(t, http.StatusOK, status, body)
		busy := threadID(body)
		status, body = do(http.MethodPost, "/threads/"+busy+"/runs", keys["globex"],
			`{"assistant_id":"agent","input":{"messages":[{"type":"human","content":"hi"}]},"metadata":{"demo":{"tokens":50,"duration_ms":20000}}}`)
		require.Equal(t, http.StatusOK, status, body)
		var run struct {
			RunID string `json:"run_id"`
		}
		require.NoError(t, json.Unmarshal([]byte(body), &run))
		testenv.WaitFor(t, 30*time.Second, "the run to start", func() bool {
			_, body := do(http.MethodGet, "/threads/"+busy+"/runs/"+run.RunID, keys["globex"], "")
			return strings.Contains(body, `"status":"running"`)
		})
		status, body = do(http.MethodDelete, "/threads/"+busy, keys["globex"], "")
		require.Equal(t, http.StatusConflict, status, body)
		require.Contains(t, body, `/thread-busy"`)

		// Retention with a TTL of zero: every idle thread goes, the busy one stays.
		n, err := turnstore.New(env.Pool).DeleteIdleThreads(ctx, 0, 1000)
		require.NoError(t, err)
		require.Positive(t, n)
		var left []string
		rows, err := env.Pool.Query(ctx, `SELECT thread_id FROM langgraph_threads`)
		require.NoError(t, err)
		for rows.Next() {
			var id string
			require.NoError(t, rows.Scan(&id))
			left = append(left, id)
		}
		require.NoError(t, rows.Err())
		require.Equal(t, []string{busy}, left, "only the thread with a run in flight is kept")

		status, body = do(http.MethodPost, "/threads/"+busy+"/runs/"+run.RunID+"/cancel?wait=true", keys["globex"], "")
		require.Contains(t, []int{http.StatusOK, http.StatusAccepted, http.StatusNoContent}, status, body)
		testenv.WaitFor(t, 30*time.Second, "the run to end", func() bool {
			status, _ := do(http.MethodDelete, "/threads/"+busy, keys["globex"], "")
			return status == http.StatusNoContent
		})
		require.Zero(t, threadsOf("globex"))
	})
}

// TestFrontDoorsRefuseLargeBodyWithContinue reproduces "a 20 MB body to /v1/chat with Expect:
// 100-continue got no final status": every front door of the combined server (one port, auth on)
// is sent 20 MB announced with Expect: 100-continue, by curl (which waits a second for the 100,
// then sends) and by Go's http.Client with ExpectContinueTimeout, and must answer a final 413
// within a bound in place of the 100, so that no body is sent into a connection the server closes.
func TestFrontDoorsRefuseLargeBodyWithContinue(t *testing.T) {
	curl, err := exec.LookPath("curl")
	require.NoError(t, err, "curl is needed: it is the client the run used")
	env := testenv.New(t, testenv.Options{Partitions: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, key, err := apikey.Create(ctx, env.Pool, "acme")
	require.NoError(t, err)
	cfg := authConfig(env, "intake,worker,gateway,a2a,aisdk,langgraph")
	cfg.HTTPAddr = testenv.FreeAddr(t)
	startStackCfg(t, env, cfg)
	base := "http://" + cfg.HTTPAddr

	const size = 20 << 20
	big := filepath.Join(t.TempDir(), "20MB.json")
	body := append([]byte(`{"x":"`), bytes.Repeat([]byte("a"), size-8)...)
	body = append(body, '"', '}')
	require.NoError(t, os.WriteFile(big, body, 0o600))
	const bound = 20 * time.Second

	// Each door's refusal: a problem document, or on the JSON-RPC route a JSON-RPC error.
	for _, door := range []struct{ name, method, path, says string }{
		{"Intake", http.MethodPost, "/v1/sessions/big-1/turns", "body-too-large"},
		{"IntakePushConfig", http.MethodPut, "/v1/turns/01a2b3c4-0000-7000-8000-000000000000/push-configs/c1", "body-too-large"},
		{"A2A", http.MethodPost, "/a2a", `"code":-32600`},
		{"AISDK", http.MethodPost, "/v1/chat", "body-too-large"},
		{"AISDKChatID", http.MethodPost, "/v1/chat/big-2", "body-too-large"},
		{"LangGraphThreads", http.MethodPost, "/threads", "body-too-large"},
		{"LangGraphRuns", http.MethodPost, "/threads/big-3/runs/stream", "body-too-large"},
	} {
		t.Run(door.name+"/Curl", func(t *testing.T) {
			ctx, cancel := context.WithTimeout(ctx, bound)
			defer cancel()
			start := time.Now()
			out, err := exec.CommandContext(ctx, curl, "-sS", "-X", door.method, "-o", "/dev/null", "-w", "%{http_code} %{size_upload}",
				"-H", "Expect: 100-continue", "-H", "Authorization: Bearer "+key, "-H", "Content-Type: application/json",
				"--data-binary", "@"+big, base+door.path).CombinedOutput()
			require.NoError(t, err, "curl: %s", out)
			// A final 413 in place of the 100: curl sent none of the body (a 413 after reading part of it
			// races the connection's reset against curl's read of the answer).
			require.Equal(t, "413 0", string(out), "a final 413 and no body sent (after %v)", time.Since(start))
		})
		t.Run(door.name+"/GoClient", func(t *testing.T) {
			ctx, cancel := context.WithTimeout(ctx, bound)
			defer cancel()
			client := &http.Client{Transport: &http.Transport{ExpectContinueTimeout: time.Second}}
			defer client.CloseIdleConnections()
			req, err := http.NewRequestWithContext(ctx, door.method, base+door.path, bytes.NewReader(body))
			require.NoError(t, err)
			req.Header.Set("Expect", "100-continue")
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			require.NoError(t, err, "a final status must arrive")
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "%s", b)
			require.Contains(t, string(b), door.says)
		})
	}
}
