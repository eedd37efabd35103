package integration

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// rpcAnswer is one JSON-RPC response as the wire carries it.
type rpcAnswer struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// httpAnswer is an HTTP answer as read: its status, its header and its body.
type httpAnswer struct {
	StatusCode int
	Header     http.Header
}

// do sends an HTTP request to the stack with the given headers and returns the answer and its
// body.
func (s *a2aStack) do(t *testing.T, method, path, body string, hdr map[string]string) (httpAnswer, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.base+path, rd)
	require.NoError(t, err)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return httpAnswer{StatusCode: resp.StatusCode, Header: resp.Header}, b
}

// rpc posts a JSON-RPC body to /a2a as tenant A.
func (s *a2aStack) rpc(t *testing.T, body string) (httpAnswer, []byte) {
	t.Helper()
	return s.do(t, http.MethodPost, "/a2a", body, map[string]string{
		"Authorization": "Bearer " + s.keyA, "Content-Type": "application/json",
	})
}

// call posts one JSON-RPC request as tenant A and decodes its single answer.
func (s *a2aStack) call(t *testing.T, body string) rpcAnswer {
	t.Helper()
	resp, b := s.rpc(t, body)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	var out rpcAnswer
	require.NoError(t, json.Unmarshal(b, &out), string(b))
	return out
}

// sendTask sends text as a non-blocking message/send and returns the task's ID.
func (s *a2aStack) sendTask(t *testing.T, text string, md string) string {
	t.Helper()
	if md == "" {
		md = "{}"
	}
	out := s.call(t, `{"jsonrpc":"2.0","id":"s","method":"message/send","params":{"configuration":{"blocking":false},`+
		`"message":{"messageId":"`+testenv.RandomHex(8)+`","role":"user","metadata":`+md+`,"parts":[{"kind":"text","text":"`+text+`"}]}}}`)
	require.Nil(t, out.Error)
	var task struct {
		ID string `json:"id"`
	}
	require.NoError(t, json.Unmarshal(out.Result, &task))
	require.NotEmpty(t, task.ID)
	return task.ID
}

// TestA2AAuthFirst: with auth on, a request without a valid API key is answered 401 with a
// WWW-Authenticate challenge before anything of it is read — whatever its method, its task ID's
// shape or whether it parses at all — and the answer names nothing of the request.
func TestA2AAuthFirst(t *testing.T) {
	t.Parallel()
	s := startA2AStack(t)
	mine := s.sendTask(t, "a task of tenant A", "")
	before := topicEnd(t, s.env)

	ids := []string{"x", "not-a-uuid", "0190b7a4-0000-7000-8000-000000000000", "zz-0190b7a4-0000-7000-8000-000000000000", mine}
	var bodies []string
	for _, id := range ids {
		for _, p := range []struct{ method, params string }{
			{"tasks/get", `{"id":"` + id + `"}`},
			{"tasks/cancel", `{"id":"` + id + `"}`},
			{"tasks/resubscribe", `{"id":"` + id + `"}`},
			{"tasks/pushNotificationConfig/set", `{"taskId":"` + id + `","pushNotificationConfig":{"url":"https://example.com/hook"}}`},
			{"tasks/pushNotificationConfig/get", `{"id":"` + id + `"}`},
			{"tasks/pushNotificationConfig/list", `{"id":"` + id + `"}`},
			{"tasks/pushNotificationConfig/delete", `{"id":"` + id + `","pushNotificationConfigId":"c"}`},
			{"message/send", `{"message":{"messageId":"m-` + id + `","taskId":"` + id + `","role":"user","parts":[{"kind":"text","text":"hi"}]}}`},
			{"message/stream", `{"message":{"messageId":"m-` + id + `","taskId":"` + id + `","role":"user","parts":[{"kind":"text","text":"hi"}]}}`},
			{"GetTask", `{"id":"` + id + `"}`},
		} {
			bodies = append(bodies, `{"jsonrpc":"2.0","id":1,"method":"`+p.method+`","params":`+p.params+`}`)
		}
	}
	bodies = append(bodies,
		`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"messageId":"fresh","role":"user","parts":[{"kind":"text","text":"hi"}]}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"agent/getAuthenticatedExtendedCard"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tasks/explode","params":{}}`,
		`{"jsonrpc":"2.0","method":"message/send","params":{"message":{"messageId":"note","role":"user","parts":[{"kind":"text","text":"hi"}]}}}`,
		`{"jsonrpc":`, `[]`, `[{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"x"}}]`, `"hello"`, ``,
		`{"jsonrpc":"2.0","id":1,"method":1}`,
	)
	wellFormedUnknown := "ts_000000000000_" + strings.Repeat("A", 43)
	for name, cred := range map[string]string{
		"NoKey": "", "NotAKey": "Bearer nope", "UnknownKey": "Bearer " + wellFormedUnknown,
		"OtherScheme": "Basic " + s.keyA, "EmptyBearer": "Bearer ",
	} {
		t.Run(name, func(t *testing.T) {
			hdr := map[string]string{"Content-Type": "application/json"}
			if cred != "" {
				hdr["Authorization"] = cred
			}
			for _, body := range bodies {
				resp, b := s.do(t, http.MethodPost, "/a2a", body, hdr)
				require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "%s: %s", body, b)
				require.True(t, strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer "), "%s: challenge %q", body, resp.Header.Get("WWW-Authenticate"))
				require.NotContains(t, string(b), mine, body)
				require.NotContains(t, string(b), "not found", body)
				require.NotContains(t, string(b), "text/event-stream", body)
			}
			for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodDelete} {
				resp, _ := s.do(t, m, "/a2a", "", hdr)
				require.Equal(t, http.StatusUnauthorized, resp.StatusCode, m)
				require.NotEmpty(t, resp.Header.Get("WWW-Authenticate"), m)
			}
		})
	}
	require.Equal(t, before, topicEnd(t, s.env), "nothing was produced for a request without a valid key")
}

// TestUnauthorizedChallenge: every front door's 401 carries a WWW-Authenticate challenge of the
// scheme keys are presented with (Bearer).
func TestUnauthorizedChallenge(t *testing.T) {
	t.Parallel()
	s := startA2AStackWith(t, "intake,worker,gateway,a2a,langgraph,aisdk", nil)
	for _, tc := range []struct{ name, method, path, body string }{
		{"Intake", http.MethodGet, "/v1/turns/0190b7a4-0000-7000-8000-000000000000", ""},
		{"Gateway", http.MethodGet, "/v1/sessions/s1/events", ""},
		{"A2A", http.MethodPost, "/a2a", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"x"}}`},
		{"LangGraph", http.MethodGet, "/threads/t1", ""},
		{"AISDK", http.MethodPost, "/v1/chat", `{"id":"c1","messages":[{"id":"m1","role":"user","parts":[{"type":"text","text":"hi"}]}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for name, cred := range map[string]string{"NoKey": "", "BadKey": "Bearer ts_000000000000_" + strings.Repeat("B", 43)} {
				hdr := map[string]string{"Content-Type": "application/json"}
				if cred != "" {
					hdr["Authorization"] = cred
				}
				resp, b := s.do(t, tc.method, tc.path, tc.body, hdr)
				require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "%s: %s", name, b)
				require.True(t, strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), `Bearer realm="turnstile"`),
					"%s: challenge %q", name, resp.Header.Get("WWW-Authenticate"))
			}
		})
	}
}

// TestWhoami: GET /v1/whoami names the key's tenant and refuses anything else with 401, as the
// OpenAPI document says.
func TestWhoami(t *testing.T) {
	t.Parallel()
	s := startA2AStackWith(t, "intake", nil)
	for key, want := range map[string]int{s.keyA: http.StatusOK, "": http.StatusUnauthorized, "nope": http.StatusUnauthorized} {
		req, err := http.NewRequest(http.MethodGet, s.base+"/v1/whoami", nil)
		require.NoError(t, err)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := apiClient.Do(req)
		require.NoError(t, err)
		var who struct {
			Tenant string `json:"tenant"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&who)
		resp.Body.Close()
		require.Equal(t, want, resp.StatusCode)
		if want == http.StatusOK {
			require.Equal(t, "acme", who.Tenant)
		} else {
			require.NotEmpty(t, resp.Header.Get("WWW-Authenticate"))
		}
	}
}

// TestA2AEnvelope: the JSON-RPC 2.0 envelope rules, with the codes JSON-RPC 2.0 prescribes.
// Batches are answered element by element and never run (A2A's JSON-RPC binding takes one
// request per HTTP request); notifications (no id member) are never answered.
func TestA2AEnvelope(t *testing.T) {
	t.Parallel()
	s := startA2AStack(t)
	const get = `"method":"tasks/get","params":{"id":"0190b7a4-0000-7000-8000-000000000000"}`
	type want struct {
		id   string // the answer's id, as JSON
		code int
	}
	for _, tc := range []struct {
		name, body string
		status     int
		answers    []want // nil: no body at all
		batch      bool
	}{
		{"NotJSON", `{"jsonrpc":`, http.StatusOK, []want{{"null", -32700}}, false},
		{"Empty", ``, http.StatusOK, []want{{"null", -32700}}, false},
		{"MethodNotString", `{"jsonrpc":"2.0","id":1,"method":1,"params":{}}`, http.StatusOK, []want{{"1", -32600}}, false},
		{"MethodNull", `{"jsonrpc":"2.0","id":"a","method":null}`, http.StatusOK, []want{{`"a"`, -32600}}, false},
		{"NoMethod", `{"jsonrpc":"2.0","id":1}`, http.StatusOK, []want{{"1", -32600}}, false},
		{"WrongVersion", `{"jsonrpc":"1.0","id":1,` + get + `}`, http.StatusOK, []want{{"1", -32600}}, false},
		{"VersionNumber", `{"jsonrpc":2.0,"id":1,` + get + `}`, http.StatusOK, []want{{"1", -32600}}, false},
		{"NoVersion", `{"id":1,` + get + `}`, http.StatusOK, []want{{"1", -32600}}, false},
		{"ObjectID", `{"jsonrpc":"2.0","id":{},` + get + `}`, http.StatusOK, []want{{"null", -32600}}, false},
		{"NotAnObject", `"tasks/get"`, http.StatusOK, []want{{"null", -32600}}, false},
		{"Null", `null`, http.StatusOK, []want{{"null", -32600}}, false},
		{"DuplicateID", `{"jsonrpc":"2.0","id":1,"id":2,` + get + `}`, http.StatusOK, []want{{"null", -32600}}, false},
		{"DuplicateMethod", `{"jsonrpc":"2.0","id":1,"method":"tasks/cancel",` + get + `}`, http.StatusOK, []want{{"null", -32600}}, false},
		{"DuplicateParam", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"a","id":"0190b7a4-0000-7000-8000-000000000000"}}`, http.StatusOK, []want{{"1", -32602}}, false},
		{"UnknownMethod", `{"jsonrpc":"2.0","id":1,"method":"tasks/explode","params":{}}`, http.StatusOK, []want{{"1", -32601}}, false},
		{"NullIDIsARequest", `{"jsonrpc":"2.0","id":null,` + get + `}`, http.StatusOK, []want{{"null", -32001}}, false},
		{"EmptyBatch", `[]`, http.StatusOK, []want{{"null", -32600}}, false},
		{"BatchNotJSON", `[{"jsonrpc":"2.0","id":1,` + get + `},`, http.StatusOK, []want{{"null", -32700}}, false},
		{
			"Batch", `[{"jsonrpc":"2.0","id":1,` + get + `},{"jsonrpc":"2.0",` + get + `},1,{"jsonrpc":"2.0","id":"b","method":"tasks/explode"}]`,
			http.StatusOK,
			[]want{{"1", -32600}, {"null", -32600}, {`"b"`, -32600}},
			true,
		},
		{"BatchOfNotifications", `[{"jsonrpc":"2.0",` + get + `},{"jsonrpc":"2.0","method":"tasks/explode"}]`, http.StatusNoContent, nil, false},
		{"Notification", `{"jsonrpc":"2.0",` + get + `}`, http.StatusNoContent, nil, false},
		{"NotificationUnknownMethod", `{"jsonrpc":"2.0","method":"tasks/explode"}`, http.StatusNoContent, nil, false},
		{"NotificationBadParams", `{"jsonrpc":"2.0","method":"message/send","params":"hi"}`, http.StatusNoContent, nil, false},
		{"NotificationNotRPC2", `{"jsonrpc":"1.0",` + get + `}`, http.StatusOK, []want{{"null", -32600}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, b := s.rpc(t, tc.body)
			require.Equal(t, tc.status, resp.StatusCode, string(b))
			if tc.answers == nil {
				require.Empty(t, b)
				return
			}
			require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			var got []rpcAnswer
			if tc.batch {
				require.NoError(t, json.Unmarshal(b, &got), string(b))
			} else {
				var one rpcAnswer
				require.NoError(t, json.Unmarshal(b, &one), string(b))
				got = []rpcAnswer{one}
			}
			require.Len(t, got, len(tc.answers), string(b))
			for i, w := range tc.answers {
				require.Equal(t, "2.0", got[i].JSONRPC, string(b))
				require.JSONEq(t, w.id, string(got[i].ID), string(b))
				require.NotNil(t, got[i].Error, string(b))
				require.Equal(t, w.code, got[i].Error.Code, string(b))
				require.Nil(t, got[i].Result)
			}
		})
	}
}

// TestA2ANotificationRuns: a message/send notification is accepted as a turn (JSON-RPC: the
// server processes a notification, it only does not answer it), once however often it is sent.
func TestA2ANotificationRuns(t *testing.T) {
	t.Parallel()
	s := startA2AStack(t)
	ctxID := "note-" + testenv.RandomHex(4)
	body := `{"jsonrpc":"2.0","method":"message/send","params":{"message":{"messageId":"n1","contextId":"` + ctxID +
		`","role":"user","parts":[{"kind":"text","text":"fire and forget"}]}}}`
	for range 2 {
		resp, b := s.rpc(t, body)
		require.Equal(t, http.StatusNoContent, resp.StatusCode, string(b))
		require.Empty(t, b)
	}
	testenv.WaitFor(t, 30*time.Second, "the notified message's turn to succeed", func() bool {
		resp, b := s.do(t, http.MethodGet, "/v1/sessions/"+ctxID+"/turns", "", map[string]string{"Authorization": "Bearer " + s.keyA})
		require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
		var page struct {
			Turns []struct {
				Status string `json:"status"`
			} `json:"turns"`
		}
		require.NoError(t, json.Unmarshal(b, &page))
		require.LessOrEqual(t, len(page.Turns), 1, "one turn however often it was sent")
		return len(page.Turns) == 1 && page.Turns[0].Status == "succeeded"
	})
}

// TestA2APushConfigDefaultID: a push config set without an ID takes the task's ID (as the Python
// and Java SDK servers do), so get by the task alone or by that ID finds it, and setting it again
// replaces it.
func TestA2APushConfigDefaultID(t *testing.T) {
	t.Parallel()
	s := startA2AStack(t)
	task := s.sendTask(t, "push me", "")
	type cfg struct {
		TaskID string `json:"taskId"`
		Config struct {
			ID  string `json:"id"`
			URL string `json:"url"`
		} `json:"pushNotificationConfig"`
	}
	decode := func(a rpcAnswer) cfg {
		t.Helper()
		require.Nil(t, a.Error)
		var c cfg
		require.NoError(t, json.Unmarshal(a.Result, &c))
		return c
	}
	set := decode(s.call(t, `{"jsonrpc":"2.0","id":1,"method":"tasks/pushNotificationConfig/set","params":{"taskId":"`+task+
		`","pushNotificationConfig":{"url":"https://example.com/one"}}}`))
	require.Equal(t, task, set.Config.ID, "the config's ID is the task's")
	got := decode(s.call(t, `{"jsonrpc":"2.0","id":2,"method":"tasks/pushNotificationConfig/get","params":{"id":"`+task+`"}}`))
	require.Equal(t, set, got)
	got = decode(s.call(t, `{"jsonrpc":"2.0","id":3,"method":"tasks/pushNotificationConfig/get","params":{"id":"`+task+
		`","pushNotificationConfigId":"`+task+`"}}`))
	require.Equal(t, set, got)
	again := decode(s.call(t, `{"jsonrpc":"2.0","id":4,"method":"tasks/pushNotificationConfig/set","params":{"taskId":"`+task+
		`","pushNotificationConfig":{"url":"https://example.com/two"}}}`))
	require.Equal(t, task, again.Config.ID)
	list := s.call(t, `{"jsonrpc":"2.0","id":5,"method":"tasks/pushNotificationConfig/list","params":{"id":"`+task+`"}}`)
	require.Nil(t, list.Error)
	var all []cfg
	require.NoError(t, json.Unmarshal(list.Result, &all))
	require.Len(t, all, 1, "set without an ID again replaces the task's default config")
	require.Equal(t, "https://example.com/two", all[0].Config.URL)
}

// TestA2APreflight: a browser on an allowed origin may call /a2a (a CORS preflight for POST with
// Authorization and Content-Type); another origin is not allowed, and the preflight needs no key.
func TestA2APreflight(t *testing.T) {
	t.Parallel()
	const allowed = "http://page.example:8000"
	s := startA2AStackWith(t, "intake,worker,gateway,a2a", func(c *config.Config) { c.A2A.CORSOrigins = allowed })
	preflight := func(origin string) httpAnswer {
		resp, _ := s.do(t, http.MethodOptions, "/a2a", "", map[string]string{
			"Origin": origin, "Access-Control-Request-Method": "POST",
			"Access-Control-Request-Headers": "authorization,content-type,a2a-version",
		})
		return resp
	}
	resp := preflight(allowed)
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	require.Equal(t, allowed, resp.Header.Get("Access-Control-Allow-Origin"))
	require.Contains(t, resp.Header.Get("Access-Control-Allow-Methods"), "POST")
	for _, h := range []string{"Authorization", "Content-Type", "A2A-Version", "Last-Event-ID"} {
		require.Contains(t, resp.Header.Get("Access-Control-Allow-Headers"), h)
	}
	require.Contains(t, resp.Header.Values("Vary"), "Origin")

	resp = preflight("http://elsewhere.example")
	require.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"), "an origin not in the list")

	// The answers themselves carry the origin, a refusal too, so the page can read them.
	r, b := s.do(t, http.MethodPost, "/a2a", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"x"}}`,
		map[string]string{"Origin": allowed, "Authorization": "Bearer " + s.keyA, "Content-Type": "application/json"})
	require.Equal(t, http.StatusOK, r.StatusCode, string(b))
	require.Equal(t, allowed, r.Header.Get("Access-Control-Allow-Origin"))
	r, _ = s.do(t, http.MethodPost, "/a2a", `{}`, map[string]string{"Origin": allowed})
	require.Equal(t, http.StatusUnauthorized, r.StatusCode)
	require.Equal(t, allowed, r.Header.Get("Access-Control-Allow-Origin"))
	require.Contains(t, r.Header.Get("Access-Control-Expose-Headers"), "WWW-Authenticate")

	// Closed by default.
	closed := startA2AStack(t)
	resp, _ = closed.do(t, http.MethodOptions, "/a2a", "", map[string]string{"Origin": allowed, "Access-Control-Request-Method": "POST"})
	require.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))
}

// TestA2AMessageToWorkingTask: a message naming a task that is still working is refused with
// UnsupportedOperationError (-32004), and nothing reaches Kafka; the refusal says what to do
// instead — the same message without taskId in the task's contextId — and that message is
// accepted at once and runs as the context's next turn, after the working one (the per-session
// order guarantee).
func TestA2AMessageToWorkingTask(t *testing.T) {
	t.Parallel()
	s := startA2AStack(t)
	ctxID := "busy-" + testenv.RandomHex(4)
	first := s.call(t, `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"configuration":{"blocking":false},"message":{"messageId":"w1","contextId":"`+
		ctxID+`","role":"user","metadata":{"demo":{"tokens":20,"duration_ms":3000}},"parts":[{"kind":"text","text":"take your time"}]}}}`)
	require.Nil(t, first.Error)
	var task struct {
		ID     string `json:"id"`
		Status struct {
			State string `json:"state"`
		} `json:"status"`
	}
	require.NoError(t, json.Unmarshal(first.Result, &task))
	testenv.WaitFor(t, 30*time.Second, "the task to be working", func() bool {
		got := s.call(t, `{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"id":"`+task.ID+`"}}`)
		require.Nil(t, got.Error)
		require.NoError(t, json.Unmarshal(got.Result, &task))
		return task.Status.State == "working"
	})

	before := topicEnd(t, s.env)
	resp, b := s.rpc(t, `{"jsonrpc":"2.0","id":3,"method":"message/send","params":{"message":{"messageId":"w2","taskId":"`+task.ID+
		`","role":"user","parts":[{"kind":"text","text":"and another thing"}]}}}`)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var refused struct {
		Error struct {
			Code int `json:"code"`
			Data struct {
				Error string `json:"error"`
			} `json:"data"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal(b, &refused), string(b))
	require.Equal(t, -32004, refused.Error.Code, string(b))
	require.Contains(t, refused.Error.Data.Error, "working", string(b))
	require.Contains(t, refused.Error.Data.Error, "without taskId", string(b), "the refusal says what to do instead")
	require.Equal(t, before, topicEnd(t, s.env), "a refused message produces nothing")

	next := s.call(t, `{"jsonrpc":"2.0","id":4,"method":"message/send","params":{"configuration":{"blocking":false},"message":{"messageId":"w2","contextId":"`+
		ctxID+`","role":"user","parts":[{"kind":"text","text":"and another thing"}]}}}`)
	require.Nil(t, next.Error, "the same message as the context's next task is accepted")
	type turnRow struct {
		Status     string     `json:"status"`
		StartedAt  *time.Time `json:"started_at"`
		FinishedAt *time.Time `json:"finished_at"`
	}
	var turns []turnRow
	testenv.WaitFor(t, 60*time.Second, "both turns to succeed", func() bool {
		resp, b := s.do(t, http.MethodGet, "/v1/sessions/"+ctxID+"/turns", "", map[string]string{"Authorization": "Bearer " + s.keyA})
		require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
		var page struct {
			Turns []turnRow `json:"turns"`
		}
		require.NoError(t, json.Unmarshal(b, &page))
		turns = page.Turns
		return len(turns) == 2 && turns[0].Status == "succeeded" && turns[1].Status == "succeeded"
	})
	// Newest first: the second message started once the first had finished.
	require.False(t, turns[0].StartedAt.Before(*turns[1].FinishedAt), "the next task ran after the working one")
}
