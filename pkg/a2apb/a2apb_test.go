package a2apb_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/turnstile-run/turnstile/pkg/a2apb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestJSONMapping pins the 1.0 wire shapes the generated types give under the proto JSON
// mapping: parts without kind, TASK_STATE_ enums, ROLE_ enums, camelCase members.
func TestJSONMapping(t *testing.T) {
	task := &a2apb.Task{
		Id: "t1", ContextId: "c1",
		Status: &a2apb.TaskStatus{State: a2apb.TaskState_TASK_STATE_INPUT_REQUIRED},
		History: []*a2apb.Message{{
			MessageId: "m1", Role: a2apb.Role_ROLE_USER,
			Parts: []*a2apb.Part{{Content: &a2apb.Part_Text{Text: "hi"}}},
		}},
	}
	b, err := a2apb.MarshalJSON(task)
	require.NoError(t, err)
	require.JSONEq(t, `{"id":"t1","contextId":"c1","status":{"state":"TASK_STATE_INPUT_REQUIRED"},
		"history":[{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hi"}]}]}`, string(b))

	var back a2apb.Task
	require.NoError(t, a2apb.UnmarshalJSON([]byte(`{"id":"t1","status":{"state":"TASK_STATE_WORKING"},"later":1}`), &back))
	require.Equal(t, a2apb.TaskState_TASK_STATE_WORKING, back.GetStatus().GetState())
	require.Error(t, a2apb.UnmarshalJSON([]byte(`{"id":5}`), &back), "a member of the wrong type")

	var resp a2apb.StreamResponse
	require.NoError(t, a2apb.UnmarshalJSON([]byte(`{"statusUpdate":{"taskId":"t1","status":{"state":"TASK_STATE_COMPLETED"}}}`), &resp))
	require.Equal(t, "t1", resp.GetStatusUpdate().GetTaskId())
}
