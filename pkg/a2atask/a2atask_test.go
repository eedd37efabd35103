package a2atask_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/turnstile-run/turnstile/pkg/a2apb"
	"github.com/turnstile-run/turnstile/pkg/a2atask"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// strictTask decodes b into a2a-go's Task strictly: the SDK's type must hold every member, so
// encoding the decoded Task again gives the same JSON.
func strictTask(t *testing.T, b []byte) a2a.Task {
	t.Helper()
	var task a2a.Task
	require.NoError(t, json.Unmarshal(b, &task))
	again, err := json.Marshal(task)
	require.NoError(t, err)
	require.JSONEq(t, string(b), string(again), "every member is the SDK type's")
	return task
}

// TestPush renders outbox payloads as migration 00150 writes them: a working first turn, then the
// task after its input-required turn and a completed follow-up.
func TestPush(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 2, 19, 0, 0, 0, time.UTC)
	first := `{"turn_id":"0b7c6a52-6f1e-4bb1-9d7c-1b2a3c4d5e6f","session_id":"ctx-1","status":"running","attempts":1,
		"input":{"text":"book a table"},"metadata":{"a2a":{"message_id":"m1"}},"accepted_at":"2026-12-02T18:59:59Z"}`
	b, err := a2atask.Push([]byte(`{"turns":[`+first+`]}`), at, "")
	require.NoError(t, err)
	task := strictTask(t, b)
	require.Equal(t, a2a.TaskID("0b7c6a52-6f1e-4bb1-9d7c-1b2a3c4d5e6f"), task.ID)
	require.Equal(t, "ctx-1", task.ContextID)
	require.Equal(t, a2a.TaskStateWorking, task.Status.State)
	require.Equal(t, at, *task.Status.Timestamp, "a working task is stamped with the change's time")
	require.Contains(t, string(b), `"kind":"task"`)

	asked := `{"turn_id":"0b7c6a52-6f1e-4bb1-9d7c-1b2a3c4d5e6f","session_id":"ctx-1","status":"succeeded","attempts":1,
		"input":{"text":"book a table"},"output":{"text":"for how many?","state":"input-required"},
		"metadata":{"a2a":{"message_id":"m1"}},"accepted_at":"2026-12-02T18:59:59Z","finished_at":"2026-12-02T19:00:01Z"}`
	follow := `{"turn_id":"3e1f0a9b-2c4d-4e6f-8a0b-1c2d3e4f5a6b","session_id":"ctx-1","status":"succeeded","attempts":1,
		"input":{"text":"two"},"output":{"text":"booked"},"metadata":{"a2a":{"task_id":"0b7c6a52-6f1e-4bb1-9d7c-1b2a3c4d5e6f","message_id":"m2"}},
		"accepted_at":"2026-12-02T19:00:02Z","finished_at":"2026-12-02T19:00:03Z"}`
	b, err = a2atask.Push([]byte(`{"turns":[`+asked+`,`+follow+`]}`), at, "")
	require.NoError(t, err)
	task = strictTask(t, b)
	require.Equal(t, a2a.TaskID("0b7c6a52-6f1e-4bb1-9d7c-1b2a3c4d5e6f"), task.ID, "the follow-up is the same task")
	require.Equal(t, a2a.TaskStateCompleted, task.Status.State)
	require.Equal(t, time.Date(2026, 12, 2, 19, 0, 3, 0, time.UTC), *task.Status.Timestamp, "an ended turn keeps its end")
	require.Len(t, task.Artifacts, 2, "one response per turn")
	require.Equal(t, a2atask.ArtifactID("3e1f0a9b-2c4d-4e6f-8a0b-1c2d3e4f5a6b"), task.Artifacts[1].ID)
	require.Len(t, task.History, 4)

	again, err := a2atask.Push([]byte(`{"turns":[`+asked+`,`+follow+`]}`), at, "")
	require.NoError(t, err)
	require.Equal(t, b, again, "the same row renders the same bytes on every attempt")

	prefixed, err := a2atask.Push([]byte(`{"turns":[`+asked+`,`+follow+`]}`), at, "euw1")
	require.NoError(t, err)
	task = strictTask(t, prefixed)
	require.Equal(t, a2a.TaskID("euw1-0b7c6a52-6f1e-4bb1-9d7c-1b2a3c4d5e6f"), task.ID, "a region's task shows its prefixed ID")
	require.Equal(t, a2atask.ArtifactID("euw1-3e1f0a9b-2c4d-4e6f-8a0b-1c2d3e4f5a6b"), task.Artifacts[1].ID)

	_, err = a2atask.Push([]byte(`{"turns":[]}`), at, "")
	require.Error(t, err)
	_, err = a2atask.Push([]byte(`not json`), at, "")
	require.Error(t, err)
}

// TestPushV1 renders a config of protocol 1.0's notification: a StreamResponse whose task is the
// task Push renders, in 1.0's shapes (no kind, TASK_STATE_ and ROLE_ enums), the same bytes on
// every attempt.
func TestPushV1(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 2, 19, 0, 0, 0, time.UTC)
	asked := `{"turn_id":"0b7c6a52-6f1e-4bb1-9d7c-1b2a3c4d5e6f","session_id":"ctx-1","status":"succeeded","attempts":1,
		"input":{"text":"book a table"},"output":{"text":"for how many?","state":"input-required"},
		"metadata":{"a2a":{"message_id":"m1"}},"accepted_at":"2026-12-02T18:59:59Z","finished_at":"2026-12-02T19:00:01Z"}`
	payload := []byte(`{"turns":[` + asked + `]}`)
	b, err := a2atask.PushV1(payload, at, "euw1")
	require.NoError(t, err)
	require.NotContains(t, string(b), `"kind"`)
	var sr a2apb.StreamResponse
	require.NoError(t, protojson.UnmarshalOptions{}.Unmarshal(b, &sr), "strictly a StreamResponse: %s", b)
	task := sr.GetTask()
	require.NotNil(t, task, "the task member: %s", b)
	require.Equal(t, "euw1-0b7c6a52-6f1e-4bb1-9d7c-1b2a3c4d5e6f", task.GetId())
	require.Equal(t, a2apb.TaskState_TASK_STATE_INPUT_REQUIRED, task.GetStatus().GetState())
	require.Contains(t, string(b), `"state":"TASK_STATE_INPUT_REQUIRED"`)
	require.Contains(t, string(b), `"role":"ROLE_USER"`)
	require.Len(t, task.GetHistory(), 2)

	old, err := a2atask.Push(payload, at, "euw1")
	require.NoError(t, err)
	v03 := strictTask(t, old)
	back, err := a2atask.FromV1Task(task)
	require.NoError(t, err)
	require.Equal(t, v03.ID, back.ID)
	require.Equal(t, v03.Status, back.Status, "the same task as the 0.3 rendering")

	again, err := a2atask.PushV1(payload, at, "euw1")
	require.NoError(t, err)
	require.Equal(t, b, again)
	_, err = a2atask.PushV1([]byte(`{"turns":[]}`), at, "")
	require.Error(t, err)
}
