package route

import (
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func TestPath(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		path, id string
		rpc      bool
	}{
		{"/v1/sessions", "", false},
		{"/v1/sessions/euw1-s1/turns", "euw1-s1", false},
		{"/v1/sessions/user-1/events", "user-1", false},
		{"/v1/sessions/s1/stream-token", "s1", false},
		{"/v1/turns/use1-0192f3c4-0000-7000-8000-000000000000", "use1-0192f3c4-0000-7000-8000-000000000000", false},
		{"/v1/turns/t1/cancel", "t1", false},
		{"/v1/chat", "", false},
		{"/v1/chat/c1/stream", "c1", false},
		{"/threads", "", false},
		{"/threads/euw1-th/runs/euw1-run/join", "euw1-th", false},
		{"/runs/stream", "", false},
		{"/a2a", "", true},
		{"/a2a/x", "", true},
		{"/a2a/x/", "", false},
		{"/a2a/", "", false},
		{"/a2a/support/.well-known/agent-card.json", "", false},
		{"/v1/agents", "", false},
		{"/v1/agents/research", "", false},
		{"/v1/agents/research/chat", "", false},
		{"/v1/agents/research/chat/use1-c1/stream", "use1-c1", false},
		{"/v1/agents/research/instances/i1", "", false},
		{"/a2a/rest/tasks/euw1-t", "euw1-t", false},
		{"/a2a/rest/tasks/euw1-t:cancel", "euw1-t", false},
		{"/a2a/rest/tasks/use1-t:subscribe", "use1-t", false},
		{"/a2a/rest/tasks/euw1-t/pushNotificationConfigs", "euw1-t", false},
		{"/a2a/rest/tasks/euw1-t/pushNotificationConfigs/use1-c", "euw1-t", false},
		{"/a2a/rest/tasks/euw1%2Dt", "euw1-t", false},
		{"/a2a/support/rest/tasks/euw1-t", "euw1-t", false},
		{"/a2a/rest/tasks", "", false},
		{"/a2a/rest/message:send", "", false},
		{"/a2a/rest/extendedAgentCard", "", false},
		{"/.well-known/agent-card.json", "", false},
		{"/openapi.yaml", "", false},
		{"/", "", false},
	} {
		id, rpc := Path(c.path)
		require.Equal(t, c.id, id, c.path)
		require.Equal(t, c.rpc, rpc, c.path)
	}
}

func TestJSONRPC(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, body, id string }{
		{"NewMessage", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"messageId":"m","role":"user","parts":[]}}}`, ""},
		{"FollowUpTask", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"taskId":"use1-t","contextId":"euw1-c"}}}`, "use1-t"},
		{"FollowUpContext", `{"jsonrpc":"2.0","id":"x","method":"message/stream","params":{"message":{"contextId":"euw1-c"}}}`, "euw1-c"},
		{"GetTask", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"euw1-t","historyLength":2}}`, "euw1-t"},
		{"Resubscribe", `{"jsonrpc":"2.0","id":1,"method":"tasks/resubscribe","params":{"id":"use1-t"}}`, "use1-t"},
		{"SetPushConfig", `{"jsonrpc":"2.0","id":1,"method":"tasks/pushNotificationConfig/set","params":{"taskId":"use1-t","pushNotificationConfig":{"url":"https://x"}}}`, "use1-t"},
		{"Batch", `[{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{}}},{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"id":"euw1-t"}}]`, "euw1-t"},
		{"V1GetTask", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"euw1-t"}}`, "euw1-t"},
		{"V1FollowUp", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"taskId":"use1-t","contextId":"euw1-c","role":"ROLE_USER"}}}`, "use1-t"},
		{"V1GetPushConfig", `{"jsonrpc":"2.0","id":1,"method":"GetTaskPushNotificationConfig","params":{"taskId":"use1-t","id":"euw1-looks-like-one"}}`, "use1-t"},
		{"V1ListTasks", `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"contextId":"euw1-c","pageSize":5}}`, "euw1-c"},
		{"NotJSON", `{"jsonrpc":`, ""},
		{"ParamsNotObject", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":[1]}`, ""},
	} {
		id, _ := JSONRPC([]byte(c.body))
		require.Equal(t, c.id, id, c.name)
	}
}

func TestJSONRPCRequestID(t *testing.T) {
	t.Parallel()
	_, id := JSONRPC([]byte(`{"jsonrpc":"2.0","id":"req-7","method":"tasks/get","params":{"id":"euw1-t"}}`))
	require.JSONEq(t, `"req-7"`, string(id))
	_, id = JSONRPC([]byte(`[{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"euw1-t"}}]`))
	require.Nil(t, id, "a batch has no one id")
}

// TestNeverPanics feeds arbitrary paths and bodies: routing reads untrusted input.
func TestNeverPanics(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		_, _ = Path(rapid.String().Draw(t, "path"))
		_, _ = JSONRPC([]byte(rapid.String().Draw(t, "body")))
	})
}

// TestREST: the A2A HTTP+JSON binding's message routes carry their owner in the body, a 1.0
// SendMessageRequest: the message's taskId, else its contextId.
func TestREST(t *testing.T) {
	t.Parallel()
	for path, want := range map[string]bool{
		"/a2a/rest/message:send": true, "/a2a/rest/message:stream": true, "/a2a/support/rest/message:send": true,
		"/a2a/rest/tasks": false, "/a2a/rest/tasks/t:cancel": false, "/a2a": false, "/v1/sessions/s/turns": false,
	} {
		require.Equal(t, want, RESTMessage(path), path)
	}
	for body, want := range map[string]string{
		`{"message":{"messageId":"m","parts":[{"text":"hi"}]}}`: "",
		`{"message":{"taskId":"use1-t","contextId":"euw1-c"}}`:  "use1-t",
		`{"message":{"contextId":"euw1-c"},"configuration":{}}`: "euw1-c",
		`{"message":`: "",
	} {
		require.Equal(t, want, RESTBody([]byte(body)), body)
	}
}
