package a2atask_test

import (
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/a2apb"
	"github.com/turnstile-run/turnstile/pkg/a2atask"
)

// TestV1Task: a 0.3 task reads in 1.0 with the same IDs, state, history and artifacts, in 1.0's
// shapes (TASK_STATE_ and ROLE_ enums, parts without kind).
func TestV1Task(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	task := &a2a.Task{
		ID: "t1", ContextID: "c1",
		Status:  a2a.TaskStatus{State: a2a.TaskStateInputRequired, Timestamp: &at},
		History: []*a2a.Message{a2atask.UserMessage("t1", "c1", "m1", "hi"), a2atask.AgentMessage("t1", "c1", "m2", "which one?")},
		Artifacts: []*a2a.Artifact{{ID: "response-t1", Name: "response", Parts: a2a.ContentParts{
			a2a.TextPart{Text: "which one?"},
			a2a.DataPart{Data: map[string]any{"n": 1.0}},
			a2a.FilePart{File: a2a.FileURI{URI: "https://x/y", FileMeta: a2a.FileMeta{Name: "y", MimeType: "text/plain"}}},
		}}},
	}
	b, err := a2apb.MarshalJSON(a2atask.V1Task(task))
	require.NoError(t, err)
	require.JSONEq(t, `{"id":"t1","contextId":"c1",
		"status":{"state":"TASK_STATE_INPUT_REQUIRED","timestamp":"2026-12-04T10:00:00Z"},
		"history":[
			{"messageId":"m1","contextId":"c1","taskId":"t1","role":"ROLE_USER","parts":[{"text":"hi"}]},
			{"messageId":"m2","contextId":"c1","taskId":"t1","role":"ROLE_AGENT","parts":[{"text":"which one?"}]}],
		"artifacts":[{"artifactId":"response-t1","name":"response","parts":[
			{"text":"which one?"},{"data":{"n":1}},{"url":"https://x/y","filename":"y","mediaType":"text/plain"}]}]}`, string(b))

	for s03, s10 := range map[a2a.TaskState]a2apb.TaskState{
		a2a.TaskStateSubmitted: a2apb.TaskState_TASK_STATE_SUBMITTED, a2a.TaskStateCanceled: a2apb.TaskState_TASK_STATE_CANCELED,
		a2a.TaskStateAuthRequired: a2apb.TaskState_TASK_STATE_AUTH_REQUIRED, a2a.TaskStateRejected: a2apb.TaskState_TASK_STATE_REJECTED,
	} {
		require.Equal(t, s10, a2atask.V1State(s03))
		require.Equal(t, s03, a2atask.FromV1State(s10))
	}
	require.Equal(t, a2a.TaskStateUnspecified, a2atask.FromV1State(a2apb.TaskState_TASK_STATE_UNSPECIFIED))
}

// TestFromV1Message: a 1.0 message (parts without kind) is the 0.3 message the handler takes; a
// part with no content is refused.
func TestFromV1Message(t *testing.T) {
	t.Parallel()
	var m a2apb.Message
	require.NoError(t, a2apb.UnmarshalJSON([]byte(`{"messageId":"m1","taskId":"t1","role":"ROLE_USER",
		"parts":[{"text":"hi"},{"raw":"aGk=","mediaType":"text/plain"},{"data":{"k":"v"}}],"metadata":{"demo":{"tokens":2}}}`), &m))
	got, err := a2atask.FromV1Message(&m)
	require.NoError(t, err)
	require.Equal(t, a2a.MessageRoleUser, got.Role)
	require.Equal(t, a2a.TaskID("t1"), got.TaskID)
	require.Equal(t, a2a.TextPart{Text: "hi"}, got.Parts[0])
	require.Equal(t, a2a.FilePart{File: a2a.FileBytes{Bytes: "aGk=", FileMeta: a2a.FileMeta{MimeType: "text/plain"}}}, got.Parts[1])
	require.Equal(t, a2a.DataPart{Data: map[string]any{"k": "v"}}, got.Parts[2])
	require.Equal(t, map[string]any{"demo": map[string]any{"tokens": 2.0}}, got.Metadata)

	require.NoError(t, a2apb.UnmarshalJSON([]byte(`{"messageId":"m1","parts":[{"metadata":{}}]}`), &m))
	_, err = a2atask.FromV1Message(&m)
	require.ErrorIs(t, err, a2atask.ErrV1Part)
}

// TestV1Event: each 0.3 stream event is one member of 1.0's StreamResponse.
func TestV1Event(t *testing.T) {
	t.Parallel()
	for ev, want := range map[a2a.Event]string{
		&a2a.Task{ID: "t"}: `{"task":{"id":"t","status":{}}}`,
		&a2a.TaskStatusUpdateEvent{TaskID: "t", Final: true, Status: a2a.TaskStatus{State: a2a.TaskStateCompleted}}:                                 `{"statusUpdate":{"taskId":"t","status":{"state":"TASK_STATE_COMPLETED"}}}`,
		&a2a.TaskArtifactUpdateEvent{TaskID: "t", Append: true, Artifact: &a2a.Artifact{ID: "a", Parts: a2a.ContentParts{a2a.TextPart{Text: "x"}}}}: `{"artifactUpdate":{"taskId":"t","append":true,"artifact":{"artifactId":"a","parts":[{"text":"x"}]}}}`,
	} {
		sr, err := a2atask.V1Event(ev)
		require.NoError(t, err)
		b, err := a2apb.MarshalJSON(sr)
		require.NoError(t, err)
		require.JSONEq(t, want, string(b))
	}
}

// TestV1PushConfig: a config round-trips, its scheme the first of 0.3's schemes.
func TestV1PushConfig(t *testing.T) {
	t.Parallel()
	c := a2atask.V1PushConfig(&a2a.TaskPushConfig{TaskID: "t", Config: a2a.PushConfig{ID: "c", URL: "https://x", Auth: &a2a.PushAuthInfo{Schemes: []string{"Bearer"}}}})
	require.Equal(t, "Bearer", c.GetAuthentication().GetScheme())
	back := a2atask.FromV1PushConfig(c)
	require.Equal(t, a2a.PushConfig{ID: "c", URL: "https://x", Auth: &a2a.PushAuthInfo{Schemes: []string{"Bearer"}}}, back)
}

// TestFromV1Event: a 1.0 stream event reads back as the 0.3 event it was made from, and an event
// with no member, or a part of no kind, is an error.
func TestFromV1Event(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, ev := range []a2a.Event{
		&a2a.Task{
			ID: "t", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking, Timestamp: &at},
			History:   []*a2a.Message{{ID: "m", Role: a2a.MessageRoleUser, Parts: a2a.ContentParts{a2a.TextPart{Text: "hi"}}}},
			Artifacts: []*a2a.Artifact{{ID: "a", Parts: a2a.ContentParts{a2a.TextPart{Text: "x"}}}},
		},
		&a2a.Message{ID: "m", Role: a2a.MessageRoleAgent, Parts: a2a.ContentParts{a2a.DataPart{Data: map[string]any{"tool_call": map[string]any{"name": "clock"}}}}},
		&a2a.TaskStatusUpdateEvent{TaskID: "t", ContextID: "c", Status: a2a.TaskStatus{
			State:   a2a.TaskStateInputRequired,
			Message: &a2a.Message{ID: "q", Role: a2a.MessageRoleAgent, Parts: a2a.ContentParts{a2a.TextPart{Text: "which?"}}},
		}},
		&a2a.TaskArtifactUpdateEvent{TaskID: "t", ContextID: "c", Append: true, LastChunk: true, Artifact: &a2a.Artifact{ID: "a", Parts: a2a.ContentParts{a2a.TextPart{Text: "x"}}}},
	} {
		sr, err := a2atask.V1Event(ev)
		require.NoError(t, err)
		b, err := a2apb.MarshalJSON(sr)
		require.NoError(t, err)
		var back a2apb.StreamResponse
		require.NoError(t, a2apb.UnmarshalJSON(b, &back))
		got, err := a2atask.FromV1Event(&back)
		require.NoError(t, err)
		require.Equal(t, ev, got, string(b))
	}
	_, err := a2atask.FromV1Event(&a2apb.StreamResponse{})
	require.ErrorIs(t, err, a2atask.ErrV1Event)
	_, err = a2atask.FromV1Event(&a2apb.StreamResponse{Payload: &a2apb.StreamResponse_ArtifactUpdate{ArtifactUpdate: &a2apb.TaskArtifactUpdateEvent{
		Artifact: &a2apb.Artifact{ArtifactId: "a", Parts: []*a2apb.Part{{}}},
	}}})
	require.ErrorIs(t, err, a2atask.ErrV1Part)
}
