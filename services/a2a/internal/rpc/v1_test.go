package rpc

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/a2apb"
	"github.com/turnstile-run/turnstile/services/a2a/internal/tasks"
)

func TestVersion(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"": "0.3", "0.3": "0.3", "0.3.0": "0.3", "1.0": V1, "1.0.1": V1, "\t1.0": V1} {
		got, err := version(in, "", "0.3")
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	got, err := version("", "1.0", "0.3")
	require.NoError(t, err)
	require.Equal(t, V1, got, "the query parameter when there is no header")
	for _, in := range []string{"0.5", "2.0", "1", "x"} {
		_, err := version(in, "", "0.3")
		require.ErrorIs(t, err, tasks.ErrVersionNotSupported, in)
	}
}

// TestRESTRoutes: each route of the HTTP+JSON binding is its 1.0 method with the request its
// path, query and body make; other methods and paths are refused.
func TestRESTRoutes(t *testing.T) {
	t.Parallel()
	s := &Server{cfg: Config{MaxBody: MaxBodyDefault}}
	for _, c := range []struct {
		method, path, body string
		name, req          string
	}{
		{"POST", "/message:send", `{"message":{"messageId":"m","parts":[{"text":"hi"}]}}`, "SendMessage", `{"message":{"messageId":"m","parts":[{"text":"hi"}]}}`},
		{"POST", "/message:stream", `{"message":{"messageId":"m"}}`, "SendStreamingMessage", `{"message":{"messageId":"m"}}`},
		{"GET", "/tasks/t-1?historyLength=2", "", "GetTask", `{"id":"t-1","historyLength":2}`},
		{"GET", "/tasks/a%2Fb", "", "GetTask", `{"id":"a/b"}`},
		{
			"GET", "/tasks?contextId=c&status=TASK_STATE_COMPLETED&pageSize=5&pageToken=p&includeArtifacts=true&statusTimestampAfter=2026-01-02T03:04:05Z", "", "ListTasks",
			`{"contextId":"c","status":"TASK_STATE_COMPLETED","pageSize":5,"pageToken":"p","includeArtifacts":true,"statusTimestampAfter":"2026-01-02T03:04:05Z"}`,
		},
		{"POST", "/tasks/t-1:cancel", "", "CancelTask", `{"id":"t-1"}`},
		{"POST", "/tasks/t-1:subscribe", "", "SubscribeToTask", `{"id":"t-1"}`},
		{"GET", "/tasks/t-1:subscribe", "", "SubscribeToTask", `{"id":"t-1"}`},
		{"POST", "/tasks/t-1/pushNotificationConfigs", `{"url":"https://x","taskId":"other"}`, "CreateTaskPushNotificationConfig", `{"taskId":"t-1","url":"https://x"}`},
		{"GET", "/tasks/t-1/pushNotificationConfigs", "", "ListTaskPushNotificationConfigs", `{"taskId":"t-1"}`},
		{"GET", "/tasks/t-1/pushNotificationConfigs/c-1", "", "GetTaskPushNotificationConfig", `{"taskId":"t-1","id":"c-1"}`},
		{"DELETE", "/tasks/t-1/pushNotificationConfigs/c-1", "", "DeleteTaskPushNotificationConfig", `{"taskId":"t-1","id":"c-1"}`},
		{"GET", "/extendedAgentCard", "", "GetExtendedAgentCard", `{}`},
	} {
		r := httptest.NewRequest(c.method, RESTPath+c.path, strings.NewReader(c.body))
		name, in, err := s.restRequest(httptest.NewRecorder(), r, strings.TrimPrefix(r.URL.EscapedPath(), RESTPath))
		require.NoError(t, err, c.path)
		require.Equal(t, c.name, name, c.path)
		b, err := a2apb.MarshalJSON(in)
		require.NoError(t, err)
		require.JSONEq(t, c.req, string(b), c.path)
	}
	for _, c := range []struct {
		method, path, body string
		want               error
	}{
		{"GET", "/message:send", "", a2a.ErrMethodNotFound},
		{"DELETE", "/tasks/t-1", "", a2a.ErrMethodNotFound},
		{"GET", "/nothing", "", a2a.ErrMethodNotFound},
		{"POST", "/message:send", "", a2a.ErrInvalidParams},
		{"POST", "/message:send", `{"message":`, a2a.ErrParseError},
		{"POST", "/message:send", `{"message":{},"message":{}}`, a2a.ErrInvalidParams},
		{"POST", "/message:send", `{"message":{"messageId":7}}`, a2a.ErrInvalidParams},
		{"GET", "/tasks?pageSize=x", "", a2a.ErrInvalidParams},
		{"GET", "/tasks?status=completed", "", a2a.ErrInvalidParams},
	} {
		r := httptest.NewRequest(c.method, RESTPath+c.path, strings.NewReader(c.body))
		_, _, err := s.restRequest(httptest.NewRecorder(), r, strings.TrimPrefix(r.URL.EscapedPath(), RESTPath))
		require.ErrorIs(t, err, c.want, "%s %s %s", c.method, c.path, c.body)
	}
}

// TestV1Errors: the A2A errors' JSON-RPC codes and HTTP statuses of A2A 1.0, section 5.4, with
// the google.rpc.ErrorInfo reason a REST client maps back to the error.
func TestV1Errors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err    error
		code   int
		status int
		reason string
	}{
		{a2a.ErrTaskNotFound, -32001, http.StatusNotFound, "TASK_NOT_FOUND"},
		{a2a.ErrTaskNotCancelable, -32002, http.StatusBadRequest, "TASK_NOT_CANCELABLE"},
		{a2a.ErrUnsupportedOperation, -32004, http.StatusBadRequest, "UNSUPPORTED_OPERATION"},
		{a2a.ErrUnsupportedContentType, -32005, http.StatusBadRequest, "CONTENT_TYPE_NOT_SUPPORTED"},
		{a2a.ErrAuthenticatedExtendedCardNotConfigured, -32007, http.StatusBadRequest, "EXTENDED_AGENT_CARD_NOT_CONFIGURED"},
		{tasks.ErrVersionNotSupported, -32009, http.StatusBadRequest, "VERSION_NOT_SUPPORTED"},
		{a2a.ErrInvalidParams, -32602, http.StatusBadRequest, "INVALID_ARGUMENT"},
		{a2a.ErrMethodNotFound, -32601, http.StatusNotFound, "NOT_FOUND"},
	} {
		e := v1ErrorOf(c.err)
		require.Equal(t, c.code, e.code, c.err.Error())
		require.Equal(t, c.status, e.status, c.err.Error())
		info := e.details(c.err)[0].(map[string]any)
		require.Equal(t, c.reason, info["reason"], c.err.Error())
		require.Equal(t, "a2a-protocol.org", info["domain"])
	}
	require.Equal(t, -32603, v1ErrorOf(http.ErrBodyNotAllowed).code, "anything else is internal")
}
