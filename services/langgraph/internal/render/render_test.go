package render_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/turnstile-run/turnstile/pkg/wire"
	"github.com/turnstile-run/turnstile/services/langgraph/internal/render"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestParseModes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, raw string
		want      []render.Mode
		err       bool
	}{
		{"AbsentIsValues", ``, []render.Mode{render.ModeValues}, false},
		{"NullIsValues", `null`, []render.Mode{render.ModeValues}, false},
		{"OneString", `"updates"`, []render.Mode{render.ModeUpdates}, false},
		{"ListDeduplicated", `["messages-tuple","values","messages-tuple"]`, []render.Mode{render.ModeMessagesTuple, render.ModeValues}, false},
		{"EmptyListIsValues", `[]`, []render.Mode{render.ModeValues}, false},
		{"LegacyMessagesRefused", `["messages"]`, nil, true},
		{"EventsRefused", `"events"`, nil, true},
		{"NotAString", `3`, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := render.ParseModes(json.RawMessage(tc.raw))
			if tc.err {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
	_, err := render.ParseModes(json.RawMessage(`["debug"]`))
	require.ErrorIs(t, err, render.ErrUnsupportedMode)
}

func data(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

func names(evs []render.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Name
	}
	return out
}

func TestRender(t *testing.T) {
	t.Parallel()
	base := wire.EventBase{TurnID: "r1", Attempt: 1}
	prior := render.ThreadMessages([]render.Turn{{ID: "r0", Status: wire.StatusSucceeded, Attempt: 1, Input: "hi", Output: "hello"}})
	run := &render.Run{
		RunID: "r1", ThreadID: "t1", AssistantID: "agent", Prior: prior, Input: "again",
		Modes: []render.Mode{render.ModeValues, render.ModeMessagesTuple, render.ModeUpdates},
	}

	t.Run("StartedIsValuesWithInput", func(t *testing.T) {
		out, end := run.Render(wire.EventStarted, data(t, base))
		require.False(t, end)
		require.Equal(t, []string{"values"}, names(out))
		require.JSONEq(t, `{"messages":[
			{"type":"human","content":"hi","id":"human-r0"},{"type":"ai","content":"hello","id":"ai-r0-1"},
			{"type":"human","content":"again","id":"human-r1"}]}`, string(out[0].Data))
	})
	t.Run("DeltaIsMessageTuple", func(t *testing.T) {
		out, _ := run.Render(wire.EventDelta, data(t, wire.DeltaData{EventBase: base, Index: 0, Text: "Echo "}))
		require.Equal(t, []string{"messages"}, names(out))
		var tuple []map[string]any
		require.NoError(t, json.Unmarshal(out[0].Data, &tuple))
		require.Len(t, tuple, 2)
		require.Equal(t, "AIMessageChunk", tuple[0]["type"])
		require.Equal(t, "Echo ", tuple[0]["content"])
		require.Equal(t, "ai-r1-1", tuple[0]["id"])
		require.Equal(t, "r1", tuple[1]["run_id"])
		require.Equal(t, "agent", tuple[1]["langgraph_node"])
	})
	t.Run("RetryStartsANewMessage", func(t *testing.T) {
		out, _ := run.Render(wire.EventRetrying, data(t, wire.RetryingData{EventBase: wire.EventBase{TurnID: "r1", Attempt: 2}, PreviousAttempt: 1}))
		require.Equal(t, []string{"values"}, names(out))
		require.NotContains(t, string(out[0].Data), "ai-r1")
		out, _ = run.Render(wire.EventDelta, data(t, wire.DeltaData{EventBase: wire.EventBase{TurnID: "r1", Attempt: 2}, Text: "Echo "}))
		require.Contains(t, string(out[0].Data), `"id":"ai-r1-2"`)
	})
	t.Run("CompletedIsUpdatesValuesEnd", func(t *testing.T) {
		out, end := run.Render(wire.EventCompleted, data(t, wire.CompletedData{EventBase: base, Output: wire.Output{Text: "Echo again"}}))
		require.True(t, end)
		require.Equal(t, []string{"updates", "values", "end"}, names(out))
		require.JSONEq(t, `{"agent":{"messages":[{"type":"ai","content":"Echo again","id":"ai-r1-1"}]}}`, string(out[0].Data))
		require.Contains(t, string(out[1].Data), `{"type":"ai","content":"Echo again","id":"ai-r1-1"}`)
		require.JSONEq(t, `null`, string(out[2].Data))
	})
	t.Run("FailedIsError", func(t *testing.T) {
		out, end := run.Render(wire.EventFailed, data(t, wire.ErrorData{EventBase: base, Error: "boom"}))
		require.True(t, end)
		require.Equal(t, []string{"error"}, names(out))
		require.JSONEq(t, `{"error":"AgentError","message":"boom"}`, string(out[0].Data))
	})
	t.Run("CancelledEndsQuietly", func(t *testing.T) {
		out, end := run.Render(wire.EventCancelled, data(t, base))
		require.True(t, end)
		require.Equal(t, []string{"end"}, names(out))
	})
	t.Run("ResetIsALegibleError", func(t *testing.T) {
		out, end := run.Render(wire.EventStreamReset, json.RawMessage(`{"reason":"epoch_changed"}`))
		require.True(t, end)
		require.Contains(t, string(out[0].Data), "StreamReset")
	})
	t.Run("ModesNotAskedForAreNotSent", func(t *testing.T) {
		only := &render.Run{RunID: "r1", Modes: []render.Mode{render.ModeMessagesTuple}}
		out, _ := only.Render(wire.EventStarted, data(t, base))
		require.Empty(t, out)
		out, _ = only.Render(wire.EventCompleted, data(t, wire.CompletedData{EventBase: base}))
		require.Equal(t, []string{"end"}, names(out))
	})
	t.Run("ToolsAreUpdates", func(t *testing.T) {
		out, _ := run.Render(wire.EventToolCall, data(t, wire.ToolCallData{EventBase: base, CallID: "c1", Name: "clock"}))
		require.Equal(t, []string{"updates"}, names(out))
		require.Contains(t, string(out[0].Data), `"tool_calls":[{"id":"c1","name":"clock","args":{},"type":"tool_call"}]`)
		out, _ = run.Render(wire.EventToolResult, data(t, wire.ToolResultData{EventBase: base, CallID: "c1", Result: json.RawMessage(`{"t":1}`)}))
		require.Contains(t, string(out[0].Data), `"tool_call_id":"c1"`)
	})
	t.Run("Deterministic", func(t *testing.T) {
		d := data(t, wire.CompletedData{EventBase: base, Output: wire.Output{Text: "x"}})
		a, _ := run.Render(wire.EventCompleted, d)
		b, _ := run.Render(wire.EventCompleted, d)
		require.Equal(t, a, b)
	})
}

func TestThreadMessages(t *testing.T) {
	t.Parallel()
	msgs := render.ThreadMessages([]render.Turn{
		{ID: "a", Status: wire.StatusSucceeded, Attempt: 2, Input: "one", Output: "uno"},
		{ID: "b", Status: wire.StatusFailed, Attempt: 3, Input: "two"},
		{ID: "c", Status: wire.StatusQueued},
	})
	require.Equal(t, []render.Message{
		{Type: "human", Content: "one", ID: "human-a"},
		{Type: "ai", Content: "uno", ID: "ai-a-2"},
		{Type: "human", Content: "two", ID: "human-b"},
	}, msgs)
}
