package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/turnstile-run/turnstile/pkg/a2apb"
	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// a2aProject is clients/a2a, the Node project that runs @a2a-js/sdk 1.x. Its node_modules come
// from `make node` (npm ci); without them the tests fail rather than skip.
func a2aProject(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "..", "clients", "a2a"))
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@a2a-js", "sdk", "package.json")); err != nil {
		t.Fatalf("clients/a2a has no node_modules (%v): run make node", err)
	}
	return dir
}

// TestA2AV1SDK runs clients/a2a's node:test suite: @a2a-js/sdk 1.x, unmodified, with its default
// protocol (1.0) over JSON-RPC and over HTTP+JSON, against an auth-on stack with the notifier:
// the card, sends blocking and not, a stream to completion with every event's shape checked on
// the wire, get, list with filters and pages, cancel, subscribe after a cut, input-required and
// its follow-up, push configs created, read, listed and deleted, and a signed delivery this test
// receives in 1.0's shape (a StreamResponse carrying the task, as the config was made in 1.0).
func TestA2AV1SDK(t *testing.T) {
	dir := a2aProject(t)
	s := startA2AStackWith(t, "intake,worker,gateway,a2a,notifier", func(cfg *config.Config) {
		cfg.Notifier.AllowHTTP = true
		cfg.Notifier.AllowNetworks = "127.0.0.0/8"
		cfg.Notifier.Poll = 20 * time.Millisecond
	})
	recv := newV1TaskReceiver(t)
	t.Cleanup(func() {
		recv.mu.Lock()
		defer recv.mu.Unlock()
		require.Empty(t, recv.bad, "every POST verifies and decodes as a task")
	})
	pushLine := regexp.MustCompile(`PUSH (\S+) (\S+)`)
	for _, transport := range []string{"JSONRPC", "HTTP+JSON"} {
		t.Run(transport, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			out, err := runNode(ctx, dir, []string{
				"TURNSTILE_URL=" + s.base, "TURNSTILE_KEY=" + s.keyA,
				"A2A_TRANSPORT=" + transport, "PUSH_URL=" + recv.srv.URL,
			}, "--test", "--test-reporter=spec", "test/sdk.test.js")
			t.Log(out)
			require.NoError(t, err, "the SDK suite failed")
			require.Contains(t, out, "ℹ fail 0")
			m := pushLine.FindStringSubmatch(out)
			require.NotNil(t, m, "the suite named the task it configured a push for")
			got := recv.await(t, m[1], endsWith(a2a.TaskStateCompleted))
			last := got[len(got)-1]
			require.Equal(t, a2a.TaskID(m[2]), last.Task.ID)
			require.Equal(t, "tok-deliver", last.Token, "the config's token rides along")
			require.NotEmpty(t, last.WebhookID, "a signed delivery")
		})
	}
}

// v1 posts a 1.0 JSON-RPC request (A2A-Version: 1.0) as tenant A and decodes its answer.
func (s *a2aStack) v1(t *testing.T, method, params string) rpcAnswer {
	t.Helper()
	resp, b := s.do(t, http.MethodPost, "/a2a", `{"jsonrpc":"2.0","id":1,"method":"`+method+`","params":`+params+`}`, map[string]string{
		"Authorization": "Bearer " + s.keyA, "Content-Type": "application/json", "A2A-Version": "1.0",
	})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	var out rpcAnswer
	require.NoError(t, json.Unmarshal(b, &out), string(b))
	return out
}

// TestA2AVersionsShareTasks: one task model under both versions. A task created through 0.3
// (a2a-go) reads through 1.0, JSON-RPC and REST, with the same ID, context, state, history and
// artifact text; a task created through 1.0 (and its input-required follow-up) reads through
// 0.3 the same way; 1.0 lists the 0.3 task in its context.
func TestA2AVersionsShareTasks(t *testing.T) {
	t.Parallel()
	s := startA2AStack(t)
	c := s.client(t, s.keyA, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	old := taskResult(t)(c.SendMessage(ctx, &a2a.MessageSendParams{Message: a2aMessage("made in 0.3", map[string]any{"demo": map[string]any{"tokens": 3}})}))
	require.Equal(t, a2a.TaskStateCompleted, old.Status.State)
	out := s.v1(t, "GetTask", `{"id":"`+string(old.ID)+`"}`)
	require.Nil(t, out.Error)
	var got a2apb.Task
	require.NoError(t, a2apb.UnmarshalJSON(out.Result, &got), string(out.Result))
	require.NotContains(t, string(out.Result), `"kind"`)
	require.Equal(t, string(old.ID), got.GetId())
	require.Equal(t, old.ContextID, got.GetContextId())
	require.Equal(t, a2apb.TaskState_TASK_STATE_COMPLETED, got.GetStatus().GetState())
	require.Len(t, got.GetHistory(), len(old.History))
	require.Equal(t, artifactText(old, a2a.ArtifactID("response-"+string(old.ID))), got.GetArtifacts()[0].GetParts()[0].GetText())

	resp, b := s.do(t, http.MethodGet, "/a2a/rest/tasks/"+string(old.ID), "", map[string]string{"Authorization": "Bearer " + s.keyA})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	var viaREST a2apb.Task
	require.NoError(t, a2apb.UnmarshalJSON(b, &viaREST))
	require.True(t, proto.Equal(&got, &viaREST), "both 1.0 bindings read the same task")

	listed := s.v1(t, "ListTasks", `{"contextId":"`+old.ContextID+`"}`)
	require.Nil(t, listed.Error)
	var page a2apb.ListTasksResponse
	require.NoError(t, a2apb.UnmarshalJSON(listed.Result, &page))
	require.Len(t, page.GetTasks(), 1)
	require.Equal(t, string(old.ID), page.GetTasks()[0].GetId())

	sent := s.v1(t, "SendMessage", `{"message":{"messageId":"`+testenv.RandomHex(8)+`","role":"ROLE_USER","parts":[{"text":"made in 1.0"}],`+
		`"metadata":{"demo":{"end_state":"input-required","tokens":2}}}}`)
	require.Nil(t, sent.Error)
	var made a2apb.SendMessageResponse
	require.NoError(t, a2apb.UnmarshalJSON(sent.Result, &made))
	require.Equal(t, a2apb.TaskState_TASK_STATE_INPUT_REQUIRED, made.GetTask().GetStatus().GetState())
	id := a2a.TaskID(made.GetTask().GetId())
	read, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: id})
	require.NoError(t, err)
	require.Equal(t, a2a.TaskStateInputRequired, read.Status.State)
	require.Equal(t, made.GetTask().GetContextId(), read.ContextID)

	// The 0.3 client answers the 1.0 task; 1.0 reads the follow-up's end.
	follow := a2aMessage("answered in 0.3", map[string]any{"demo": map[string]any{"tokens": 2}})
	follow.TaskID = id
	done := taskResult(t)(c.SendMessage(ctx, &a2a.MessageSendParams{Message: follow}))
	require.Equal(t, id, done.ID)
	require.Equal(t, a2a.TaskStateCompleted, done.Status.State)
	out = s.v1(t, "GetTask", `{"id":"`+string(id)+`"}`)
	require.Nil(t, out.Error)
	require.NoError(t, a2apb.UnmarshalJSON(out.Result, &got))
	require.Equal(t, a2apb.TaskState_TASK_STATE_COMPLETED, got.GetStatus().GetState())
	require.Len(t, got.GetHistory(), len(done.History))
}

// TestA2AV1AuthFirst: with auth on, every 1.0 method on JSON-RPC and every route of the REST
// binding, with no key or a bad one and any task ID shape, is answered 401 with a Bearer
// challenge before anything of the request is read, and the answer names nothing of it.
func TestA2AV1AuthFirst(t *testing.T) {
	t.Parallel()
	s := startA2AStack(t)
	mine := s.sendTask(t, "a task of tenant A", "")
	before := topicEnd(t, s.env)

	type req struct{ method, path, body string }
	var reqs []req
	for _, id := range []string{"x", "not-a-uuid", "0190b7a4-0000-7000-8000-000000000000", "zz-0190b7a4-0000-7000-8000-000000000000", "a%2Fb", mine} {
		msg := `{"message":{"messageId":"m","taskId":"` + id + `","role":"ROLE_USER","parts":[{"text":"hi"}]}}`
		for _, p := range []struct{ method, params string }{
			{"SendMessage", msg},
			{"SendStreamingMessage", msg},
			{"GetTask", `{"id":"` + id + `"}`},
			{"CancelTask", `{"id":"` + id + `"}`},
			{"SubscribeToTask", `{"id":"` + id + `"}`},
			{"ListTasks", `{"contextId":"` + id + `"}`},
			{"CreateTaskPushNotificationConfig", `{"taskId":"` + id + `","url":"https://example.com/hook"}`},
			{"GetTaskPushNotificationConfig", `{"taskId":"` + id + `","id":"c"}`},
			{"ListTaskPushNotificationConfigs", `{"taskId":"` + id + `"}`},
			{"DeleteTaskPushNotificationConfig", `{"taskId":"` + id + `","id":"c"}`},
			{"GetExtendedAgentCard", `{}`},
		} {
			reqs = append(reqs, req{http.MethodPost, "/a2a", `{"jsonrpc":"2.0","id":1,"method":"` + p.method + `","params":` + p.params + `}`})
		}
		reqs = append(reqs,
			req{http.MethodPost, "/a2a/rest/message:send", msg}, req{http.MethodPost, "/a2a/rest/message:stream", msg},
			req{http.MethodGet, "/a2a/rest/tasks/" + id, ""}, req{http.MethodGet, "/a2a/rest/tasks?contextId=" + id, ""},
			req{http.MethodPost, "/a2a/rest/tasks/" + id + ":cancel", ""}, req{http.MethodPost, "/a2a/rest/tasks/" + id + ":subscribe", ""},
			req{http.MethodGet, "/a2a/rest/tasks/" + id + ":subscribe", ""},
			req{http.MethodPost, "/a2a/rest/tasks/" + id + "/pushNotificationConfigs", `{"url":"https://example.com/hook"}`},
			req{http.MethodGet, "/a2a/rest/tasks/" + id + "/pushNotificationConfigs", ""},
			req{http.MethodGet, "/a2a/rest/tasks/" + id + "/pushNotificationConfigs/c", ""},
			req{http.MethodDelete, "/a2a/rest/tasks/" + id + "/pushNotificationConfigs/c", ""},
		)
	}
	reqs = append(reqs, req{http.MethodGet, "/a2a/rest/extendedAgentCard", ""}, req{http.MethodGet, "/a2a/rest/nothing", ""},
		req{http.MethodPut, "/a2a/rest/message:send", `{"message":`}, req{http.MethodPost, "/a2a", `{"jsonrpc":"2.0","id":1,"method":"Explode"}`})
	wellFormedUnknown := "ts_000000000000_" + strings.Repeat("A", 43)
	for name, cred := range map[string]string{
		"NoKey": "", "NotAKey": "Bearer nope", "UnknownKey": "Bearer " + wellFormedUnknown, "OtherScheme": "Basic " + s.keyA,
	} {
		t.Run(name, func(t *testing.T) {
			for _, version := range []string{"1.0", ""} {
				hdr := map[string]string{"Content-Type": "application/json"}
				if version != "" {
					hdr["A2A-Version"] = version
				}
				if cred != "" {
					hdr["Authorization"] = cred
				}
				for _, r := range reqs {
					resp, b := s.do(t, r.method, r.path, r.body, hdr)
					what := r.method + " " + r.path + " " + r.body
					require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "%s: %s", what, b)
					require.True(t, strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer "), "%s: challenge %q", what, resp.Header.Get("WWW-Authenticate"))
					require.NotContains(t, string(b), mine, what)
					require.NotContains(t, strings.ToLower(string(b)), "not found", what)
					require.NotContains(t, resp.Header.Get("Content-Type"), "text/event-stream", what)
				}
			}
		})
	}
	require.Equal(t, before, topicEnd(t, s.env), "nothing was produced for a request without a valid key")
}
