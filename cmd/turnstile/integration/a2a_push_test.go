package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/turnstile-run/turnstile/pkg/a2apb"
	"github.com/turnstile-run/turnstile/pkg/a2atask"
	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/pkg/turnstore"
)

// pushed is one A2A push notification a taskReceiver took.
type pushed struct {
	WebhookID     string
	Token         string
	Authorization string
	Task          a2a.Task
}

// taskReceiver is an A2A client's webhook: it verifies every POST with the Standard Webhooks
// library, decodes the body strictly into a2a-go's Task, and keeps them by path (one path per
// push config). POSTs that fail either check are counted, answered 400, and fail the test.
type taskReceiver struct {
	srv    *httptest.Server
	verify *standardwebhooks.Webhook

	// v1 takes protocol 1.0's notifications: a StreamResponse whose task member is the task
	// (A2A 1.0, section 4.3.3), decoded strictly by the proto JSON mapping, without a 0.3 kind.
	v1 bool

	mu      sync.Mutex
	got     map[string][]pushed
	bad     []string
	changed chan struct{}
}

// newV1TaskReceiver is a receiver of protocol 1.0's notifications.
func newV1TaskReceiver(t *testing.T) *taskReceiver {
	r := newTaskReceiver(t)
	r.v1 = true
	return r
}

func newTaskReceiver(t *testing.T) *taskReceiver {
	t.Helper()
	v, err := standardwebhooks.NewWebhook(config.NotifierSigningSecretDefault)
	require.NoError(t, err)
	r := &taskReceiver{verify: v, got: map[string][]pushed{}, changed: make(chan struct{}, 1)}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *taskReceiver) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	reject := func(why string) {
		r.mu.Lock()
		r.bad = append(r.bad, why)
		r.mu.Unlock()
		w.WriteHeader(http.StatusBadRequest)
	}
	if err != nil {
		reject(err.Error())
		return
	}
	if err := r.verify.Verify(body, req.Header); err != nil {
		reject("signature: " + err.Error())
		return
	}
	var task a2a.Task
	if r.v1 {
		var sr a2apb.StreamResponse
		if err := protojson.Unmarshal(body, &sr); err != nil {
			reject("decode a 1.0 StreamResponse: " + err.Error())
			return
		}
		t, err := a2atask.FromV1Task(sr.GetTask())
		if sr.GetTask() == nil || err != nil || strings.Contains(string(body), `"kind"`) {
			reject(fmt.Sprintf("not a 1.0 StreamResponse carrying a task (%v): %s", err, body))
			return
		}
		task = *t
	} else {
		if err := json.Unmarshal(body, &task); err != nil {
			reject("decode: " + err.Error())
			return
		}
		// Strictly: the SDK's type holds every member (encoding it again gives the same JSON) and
		// the body says it is a task.
		again, _ := json.Marshal(task)
		var a, b, kind map[string]any
		_ = json.Unmarshal(body, &a)
		_ = json.Unmarshal(again, &b)
		_ = json.Unmarshal(body, &kind)
		if !jsonEqual(a, b) || kind["kind"] != "task" {
			reject("not exactly an a2a.Task: " + string(body))
			return
		}
	}
	r.mu.Lock()
	r.got[req.URL.Path] = append(r.got[req.URL.Path], pushed{
		WebhookID: req.Header.Get("webhook-id"), Token: req.Header.Get("X-A2A-Notification-Token"),
		Authorization: req.Header.Get("Authorization"), Task: task,
	})
	r.mu.Unlock()
	select {
	case r.changed <- struct{}{}:
	default:
	}
	w.WriteHeader(http.StatusOK)
}

func jsonEqual(a, b map[string]any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// at returns what path received.
func (r *taskReceiver) at(path string) []pushed {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]pushed(nil), r.got[path]...)
}

// await waits for path's notifications to satisfy done, woken by each POST.
func (r *taskReceiver) await(t *testing.T, path string, done func([]pushed) bool) []pushed {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		if got := r.at(path); done(got) {
			return got
		}
		select {
		case <-r.changed:
		case <-timeout:
			t.Fatalf("%s: notifications so far: %v", path, states(r.at(path)))
		}
	}
}

func states(ps []pushed) []a2a.TaskState {
	out := make([]a2a.TaskState, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.Task.Status.State)
	}
	return out
}

// endsWith reports whether the last notification has state s.
func endsWith(s a2a.TaskState) func([]pushed) bool {
	return func(ps []pushed) bool { return len(ps) > 0 && ps[len(ps)-1].Task.Status.State == s }
}

// openNotifications counts the outbox rows not yet delivered or given up.
func openNotifications(t *testing.T, env *testenv.Env) int {
	t.Helper()
	var n int
	require.NoError(t, env.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM turn_notifications WHERE delivered_at IS NULL AND dead_at IS NULL`).Scan(&n))
	return n
}

// TestA2APushNotifications drives push notifications through the official a2a-go client against
// the a2a role over the whole stack (auth on, the notifier role beside it): the config methods,
// a send's configuration.pushNotificationConfig followed through an input-required task and its
// follow-up, a deleted config, and retention.
func TestA2APushNotifications(t *testing.T) {
	s := startA2AStackWith(t, "intake,worker,gateway,a2a,notifier", func(cfg *config.Config) {
		cfg.Notifier.AllowHTTP = true
		cfg.Notifier.AllowNetworks = "127.0.0.0/8"
		cfg.Notifier.Poll = 20 * time.Millisecond
	})
	env, keyA, keyB := s.env, s.keyA, s.keyB
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := s.client(t, keyA, nil)
	other := s.client(t, keyB, nil)
	recv := newTaskReceiver(t)
	t.Cleanup(func() {
		recv.mu.Lock()
		defer recv.mu.Unlock()
		require.Empty(t, recv.bad, "every POST verifies and decodes as an a2a.Task")
	})

	t.Run("ConfigMethods", func(t *testing.T) {
		task := taskResult(t)(c.SendMessage(ctx, &a2a.MessageSendParams{
			Message: a2aMessage("configs", map[string]any{"demo": map[string]any{"tokens": 2}}),
			Config:  &a2a.MessageSendConfig{Blocking: ptr(false)},
		}))
		set, err := c.SetTaskPushConfig(ctx, &a2a.TaskPushConfig{TaskID: task.ID, Config: a2a.PushConfig{
			ID: "cfg-a", URL: recv.srv.URL + "/methods", Token: "tok-a",
			Auth: &a2a.PushAuthInfo{Schemes: []string{"Bearer"}, Credentials: "secret"},
		}})
		require.NoError(t, err)
		require.Equal(t, task.ID, set.TaskID)
		require.Equal(t, "cfg-a", set.Config.ID)
		require.Equal(t, []string{"Bearer"}, set.Config.Auth.Schemes)
		require.Empty(t, set.Config.Auth.Credentials, "credentials are never shown again")
		made, err := c.SetTaskPushConfig(ctx, &a2a.TaskPushConfig{TaskID: task.ID, Config: a2a.PushConfig{URL: recv.srv.URL + "/methods"}})
		require.NoError(t, err)
		require.NotEmpty(t, made.Config.ID, "a config without an id gets one")

		got, err := c.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigParams{TaskID: task.ID, ConfigID: "cfg-a"})
		require.NoError(t, err)
		require.Equal(t, recv.srv.URL+"/methods", got.Config.URL)
		require.Empty(t, got.Config.Token, "a token is never shown again")
		first, err := c.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigParams{TaskID: task.ID})
		require.NoError(t, err)
		require.Equal(t, "cfg-a", first.Config.ID, "without an id: the oldest config")
		all, err := c.ListTaskPushConfig(ctx, &a2a.ListTaskPushConfigParams{TaskID: task.ID})
		require.NoError(t, err)
		require.Len(t, all, 2)
		require.Equal(t, []string{"cfg-a", made.Config.ID}, []string{all[0].Config.ID, all[1].Config.ID})

		// Replacing keeps one config of that id.
		_, err = c.SetTaskPushConfig(ctx, &a2a.TaskPushConfig{TaskID: task.ID, Config: a2a.PushConfig{ID: "cfg-a", URL: recv.srv.URL + "/methods-2"}})
		require.NoError(t, err)
		got, err = c.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigParams{TaskID: task.ID, ConfigID: "cfg-a"})
		require.NoError(t, err)
		require.Equal(t, recv.srv.URL+"/methods-2", got.Config.URL)
		require.Empty(t, got.Config.Token)

		require.NoError(t, c.DeleteTaskPushConfig(ctx, &a2a.DeleteTaskPushConfigParams{TaskID: task.ID, ConfigID: "cfg-a"}))
		_, err = c.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigParams{TaskID: task.ID, ConfigID: "cfg-a"})
		require.ErrorIs(t, err, a2a.ErrTaskNotFound, "a deleted config is not found")
		require.ErrorIs(t, c.DeleteTaskPushConfig(ctx, &a2a.DeleteTaskPushConfigParams{TaskID: task.ID, ConfigID: "cfg-a"}), a2a.ErrTaskNotFound)
		all, err = c.ListTaskPushConfig(ctx, &a2a.ListTaskPushConfigParams{TaskID: task.ID})
		require.NoError(t, err)
		require.Len(t, all, 1)

		// Unknown config, unknown task.
		_, err = c.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigParams{TaskID: task.ID, ConfigID: "nope"})
		require.ErrorIs(t, err, a2a.ErrTaskNotFound)
		unknown := a2a.TaskID("6f2b9c1e-0000-4000-8000-000000000000")
		_, err = c.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigParams{TaskID: unknown, ConfigID: "cfg-a"})
		require.ErrorIs(t, err, a2a.ErrTaskNotFound)
		_, err = c.ListTaskPushConfig(ctx, &a2a.ListTaskPushConfigParams{TaskID: unknown})
		require.ErrorIs(t, err, a2a.ErrTaskNotFound)
		_, err = c.SetTaskPushConfig(ctx, &a2a.TaskPushConfig{TaskID: unknown, Config: a2a.PushConfig{URL: recv.srv.URL + "/x"}})
		require.ErrorIs(t, err, a2a.ErrTaskNotFound)

		// Another tenant's task is not found, whatever the method, and nothing changes.
		_, err = other.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigParams{TaskID: task.ID, ConfigID: made.Config.ID})
		require.ErrorIs(t, err, a2a.ErrTaskNotFound)
		_, err = other.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigParams{TaskID: task.ID})
		require.ErrorIs(t, err, a2a.ErrTaskNotFound)
		_, err = other.ListTaskPushConfig(ctx, &a2a.ListTaskPushConfigParams{TaskID: task.ID})
		require.ErrorIs(t, err, a2a.ErrTaskNotFound)
		_, err = other.SetTaskPushConfig(ctx, &a2a.TaskPushConfig{TaskID: task.ID, Config: a2a.PushConfig{ID: "evil", URL: recv.srv.URL + "/evil"}})
		require.ErrorIs(t, err, a2a.ErrTaskNotFound)
		require.ErrorIs(t, other.DeleteTaskPushConfig(ctx, &a2a.DeleteTaskPushConfigParams{TaskID: task.ID, ConfigID: made.Config.ID}), a2a.ErrTaskNotFound)
		all, err = c.ListTaskPushConfig(ctx, &a2a.ListTaskPushConfigParams{TaskID: task.ID})
		require.NoError(t, err)
		require.Len(t, all, 1, "the other tenant changed nothing")

		// Bad configs are invalid params and store nothing.
		for _, bad := range []a2a.PushConfig{
			{URL: ""},
			{URL: "ftp://example.com/hook"},
			{URL: "https://user:pw@example.com/hook"},
			{URL: "https://example.com/hook", Token: "line\nbreak"},
			{URL: "https://example.com/hook", Auth: &a2a.PushAuthInfo{Schemes: []string{"Digest"}, Credentials: "x"}},
			{ID: strings.Repeat("i", 129), URL: "https://example.com/hook"},
		} {
			_, err = c.SetTaskPushConfig(ctx, &a2a.TaskPushConfig{TaskID: task.ID, Config: bad})
			require.ErrorIs(t, err, a2a.ErrInvalidParams, "%+v", bad)
		}
		all, err = c.ListTaskPushConfig(ctx, &a2a.ListTaskPushConfigParams{TaskID: task.ID})
		require.NoError(t, err)
		require.Len(t, all, 1)
	})

	t.Run("NativeRoutes", func(t *testing.T) {
		task := taskResult(t)(c.SendMessage(ctx, &a2a.MessageSendParams{
			Message: a2aMessage("native", map[string]any{"demo": map[string]any{"tokens": 1}}),
			Config:  &a2a.MessageSendConfig{Blocking: ptr(false)},
		}))
		// The task ends before its config to example.com is stored: a state change while it is
		// stored would owe that address a notification, which this sandbox cannot deliver, and the
		// next subtest waits for the whole outbox to drain.
		testenv.WaitFor(t, 30*time.Second, "the task to complete", func() bool {
			got, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID})
			return err == nil && got.Status.State == a2a.TaskStateCompleted
		})
		base := s.base + "/v1/turns/" + string(task.ID) + "/push-configs"
		// do answers the status, the headers and the body (read and closed).
		type answer struct {
			StatusCode int
			Header     http.Header
		}
		do := func(client *http.Client, method, url, key, ctype, body string) (answer, []byte) {
			t.Helper()
			req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer "+key)
			if ctype != "" {
				req.Header.Set("Content-Type", ctype)
			}
			resp, err := client.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			return answer{resp.StatusCode, resp.Header}, b
		}
		// The good paths, each checked against the OpenAPI document.
		resp, b := do(apiClient, http.MethodPut, base+"/n1", keyA, "application/json",
			`{"url":"https://example.com/hook","token":"t","authentication":{"schemes":["Basic"],"credentials":"dTpw"}}`)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
		require.NotContains(t, string(b), "dTpw", "credentials are write-only")
		resp, b = do(apiClient, http.MethodGet, base, keyA, "", "")
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
		require.Contains(t, string(b), `"id":"n1"`)
		resp, _ = do(apiClient, http.MethodGet, base+"/n1", keyA, "", "")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		resp, _ = do(apiClient, http.MethodDelete, base+"/n1", keyA, "", "")
		require.Equal(t, http.StatusNoContent, resp.StatusCode)
		// Bad input: a problem document, nothing stored.
		for _, tc := range []struct {
			name, method, url, key, ctype, body string
			status                              int
			problem                             string
		}{
			{"Gone", http.MethodGet, base + "/n1", keyA, "", "", http.StatusNotFound, "push-config-not-found"},
			{"DeleteGone", http.MethodDelete, base + "/n1", keyA, "", "", http.StatusNotFound, "push-config-not-found"},
			{"OtherTenant", http.MethodGet, base, keyB, "", "", http.StatusNotFound, "turn-not-found"},
			{"OtherTenantPut", http.MethodPut, base + "/x", keyB, "application/json", `{"url":"https://example.com/h"}`, http.StatusNotFound, "turn-not-found"},
			{"BadTurnID", http.MethodGet, s.base + "/v1/turns/nope/push-configs", keyA, "", "", http.StatusBadRequest, "invalid-turn-id"},
			{"Malformed", http.MethodPut, base + "/x", keyA, "application/json", `{"url":`, http.StatusBadRequest, "invalid-body"},
			{"UnknownField", http.MethodPut, base + "/x", keyA, "application/json", `{"url":"https://example.com/h","secret":1}`, http.StatusBadRequest, "invalid-body"},
			{"TextPlain", http.MethodPut, base + "/x", keyA, "text/plain", `{"url":"https://example.com/h"}`, http.StatusUnsupportedMediaType, "unsupported-media-type"},
			{"OtherID", http.MethodPut, base + "/x", keyA, "application/json", `{"id":"y","url":"https://example.com/h"}`, http.StatusUnprocessableEntity, "validation-failed"},
			{"FTPURL", http.MethodPut, base + "/x", keyA, "application/json", `{"url":"ftp://example.com/h"}`, http.StatusUnprocessableEntity, "validation-failed"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				resp, b := do(http.DefaultClient, tc.method, tc.url, tc.key, tc.ctype, tc.body)
				require.Equal(t, tc.status, resp.StatusCode, "%s", b)
				require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
				require.Contains(t, string(b), "/"+tc.problem+`"`)
			})
		}
		var n int
		require.NoError(t, env.Pool.QueryRow(ctx, `SELECT count(*) FROM task_push_configs WHERE task_id = $1`, string(task.ID)).Scan(&n))
		require.Zero(t, n, "bad input stored nothing")
	})

	t.Run("SendWithConfigThroughFollowUp", func(t *testing.T) {
		ask := map[string]any{"demo": map[string]any{"end_state": "input-required", "tokens": 5}}
		task := taskResult(t)(c.SendMessage(ctx, &a2a.MessageSendParams{
			Message: a2aMessage("book a table", ask),
			Config: &a2a.MessageSendConfig{PushConfig: &a2a.PushConfig{
				URL: recv.srv.URL + "/a", Token: "tok-a",
				Auth: &a2a.PushAuthInfo{Schemes: []string{"Bearer"}, Credentials: "cred-a"},
			}},
		}))
		require.Equal(t, a2a.TaskStateInputRequired, task.Status.State)
		gotA := recv.await(t, "/a", endsWith(a2a.TaskStateInputRequired))
		require.Equal(t, []a2a.TaskState{a2a.TaskStateWorking, a2a.TaskStateInputRequired}, states(gotA))
		configs, err := c.ListTaskPushConfig(ctx, &a2a.ListTaskPushConfigParams{TaskID: task.ID})
		require.NoError(t, err)
		require.Len(t, configs, 1, "the send's config is stored with the task")

		// A second config for the rest of the task, and the first one deleted: it stops receiving.
		_, err = c.SetTaskPushConfig(ctx, &a2a.TaskPushConfig{TaskID: task.ID, Config: a2a.PushConfig{ID: "b", URL: recv.srv.URL + "/b", Token: "tok-b"}})
		require.NoError(t, err)
		require.NoError(t, c.DeleteTaskPushConfig(ctx, &a2a.DeleteTaskPushConfigParams{TaskID: task.ID, ConfigID: configs[0].Config.ID}))

		follow := a2aMessage("for two, at eight", nil)
		follow.TaskID, follow.ContextID = task.ID, task.ContextID
		done := taskResult(t)(c.SendMessage(ctx, &a2a.MessageSendParams{Message: follow}))
		require.Equal(t, a2a.TaskStateCompleted, done.Status.State)
		gotB := recv.await(t, "/b", endsWith(a2a.TaskStateCompleted))
		testenv.WaitFor(t, 30*time.Second, "the outbox to drain", func() bool { return openNotifications(t, env) == 0 })

		require.Equal(t, []a2a.TaskState{a2a.TaskStateWorking, a2a.TaskStateCompleted}, states(recv.at("/b")),
			"the follow-up's states, to the config set after the first turn")
		require.Len(t, recv.at("/a"), 2, "the deleted config received nothing more")
		seq := map[a2a.TaskID]int64{}
		for _, p := range append(gotA, gotB...) {
			require.Equal(t, task.ID, p.Task.ID, "one task throughout")
			require.Equal(t, task.ContextID, p.Task.ContextID)
			require.NotNil(t, p.Task.Status.Timestamp, "every state says when")
			n, err := strconv.ParseInt(strings.TrimPrefix(p.WebhookID, "msg_"), 10, 64)
			require.NoError(t, err)
			require.Greater(t, n, seq[p.Task.ID], "per task in order")
			seq[p.Task.ID] = n
		}
		for _, p := range gotA {
			require.Equal(t, "tok-a", p.Token)
			require.Equal(t, "Bearer cred-a", p.Authorization, "the config's Bearer credentials")
		}
		for _, p := range gotB {
			require.Equal(t, "tok-b", p.Token)
			require.Empty(t, p.Authorization)
		}
		// The pushed task is the task tasks/get answers.
		asked := gotA[1].Task
		require.NotNil(t, asked.Status.Message, "the agent's question travels with input-required")
		last := gotB[len(gotB)-1].Task
		read, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID})
		require.NoError(t, err)
		require.Equal(t, read.Status, last.Status)
		require.Equal(t, read.Artifacts, last.Artifacts)
		require.Len(t, last.Artifacts, 2, "one response per turn")
		require.Equal(t, read.History, last.History)

		// The native turns keep the credentials and tokens out of their views.
		var leaked int
		require.NoError(t, env.Pool.QueryRow(ctx, `SELECT count(*) FROM turns WHERE metadata ? 'turnstile.push_configs'`).Scan(&leaked))
		require.Zero(t, leaked, "the configs are moved out of the metadata")

		// Retention deletes the task's turns, and its configs and notifications with them.
		var configsBefore, notesBefore int
		require.NoError(t, env.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM task_push_configs WHERE task_id = $1),
			(SELECT count(*) FROM turn_notifications WHERE turn_id = $1)`, string(task.ID)).Scan(&configsBefore, &notesBefore))
		require.Equal(t, 1, configsBefore)
		require.Equal(t, 4, notesBefore)
		_, err = turnstore.New(env.Pool).DeleteFinished(ctx, 0, 10_000)
		require.NoError(t, err)
		var configsAfter, notesAfter int
		require.NoError(t, env.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM task_push_configs WHERE task_id = $1),
			(SELECT count(*) FROM turn_notifications WHERE turn_id = $1)`, string(task.ID)).Scan(&configsAfter, &notesAfter))
		require.Zero(t, configsAfter, "configs go with their task")
		require.Zero(t, notesAfter, "notifications go with their task")
		_, err = c.ListTaskPushConfig(ctx, &a2a.ListTaskPushConfigParams{TaskID: task.ID})
		require.ErrorIs(t, err, a2a.ErrTaskNotFound)
	})
}
