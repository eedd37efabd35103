package render_test

import (
	"encoding/json"
	"strings"
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
		{"EventsAndDebug", `["events","debug"]`, []render.Mode{render.ModeEvents, render.ModeDebug}, false},
		{"UnknownRefused", `"frames"`, nil, true},
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
	_, err := render.ParseModes(json.RawMessage(`["values","frames"]`))
	require.ErrorIs(t, err, render.ErrUnsupportedMode)
	require.ErrorContains(t, err, `"frames"`, "the refusal names the mode")
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

// TestRenderEventsAndDebug: the events mode renders a run as LangChain's streamed events and
// the debug mode as LangGraph's task, task_result and checkpoint, from the native events alone.
func TestRenderEventsAndDebug(t *testing.T) {
	t.Parallel()
	base := wire.EventBase{TurnID: "r1", Attempt: 1}
	run := &render.Run{RunID: "r1", ThreadID: "t1", AssistantID: "agent", Input: "hi", Modes: []render.Mode{render.ModeEvents, render.ModeDebug}}
	type lc struct {
		Event     string          `json:"event"`
		Name      string          `json:"name"`
		RunID     string          `json:"run_id"`
		Data      json.RawMessage `json:"data"`
		ParentIDs []string        `json:"parent_ids"`
	}
	type dbg struct {
		Type    string          `json:"type"`
		Step    int             `json:"step"`
		Payload json.RawMessage `json:"payload"`
	}
	var events []lc
	var debugs []dbg
	ended := false
	for _, ev := range []struct {
		typ wire.EventType
		v   any
	}{
		{wire.EventStarted, base},
		{wire.EventCustom, wire.CustomData{EventBase: base, Name: "progress", Data: json.RawMessage(`{"step":1}`)}},
		{wire.EventToolCall, wire.ToolCallData{EventBase: base, CallID: "c1", Name: "clock", Arguments: json.RawMessage(`{"tz":"UTC"}`)}},
		{wire.EventToolResult, wire.ToolResultData{EventBase: base, CallID: "c1", Result: json.RawMessage(`{"time":"noon"}`)}},
		{wire.EventDelta, wire.DeltaData{EventBase: base, Text: "It is "}},
		{wire.EventDelta, wire.DeltaData{EventBase: base, Index: 1, Text: "noon"}},
		{wire.EventCompleted, wire.CompletedData{EventBase: base, Output: wire.Output{Text: "It is noon"}}},
	} {
		out, end := run.Render(ev.typ, data(t, ev.v))
		ended = end
		for _, e := range out {
			switch e.Name {
			case "events":
				var x lc
				require.NoError(t, json.Unmarshal(e.Data, &x))
				events = append(events, x)
			case "debug":
				var x dbg
				require.NoError(t, json.Unmarshal(e.Data, &x))
				debugs = append(debugs, x)
			case "end":
			default:
				t.Fatalf("mode not asked for: %s", e.Name)
			}
		}
	}
	require.True(t, ended)
	kinds := make([]string, len(events))
	for i, e := range events {
		kinds[i] = e.Event + ":" + e.Name
	}
	require.Equal(t, []string{
		"on_chain_start:agent", "on_custom_event:progress", "on_tool_start:clock", "on_tool_end:tools",
		"on_chat_model_stream:agent", "on_chat_model_stream:agent", "on_chain_end:agent",
	}, kinds)
	require.Empty(t, events[0].ParentIDs, "the run is the root")
	require.Equal(t, []string{"r1"}, events[4].ParentIDs)
	require.JSONEq(t, `{"step":1}`, string(events[1].Data))
	require.JSONEq(t, `{"input":{"tz":"UTC"}}`, string(events[2].Data))
	require.Contains(t, string(events[4].Data), `"content":"It is "`)
	require.JSONEq(t, `{"output":{"messages":[{"type":"ai","content":"It is noon","id":"ai-r1-1"}]}}`, string(events[6].Data))

	require.Len(t, debugs, 3)
	require.Equal(t, []string{"task", "task_result", "checkpoint"}, []string{debugs[0].Type, debugs[1].Type, debugs[2].Type})
	require.JSONEq(t, `{"id":"task-r1-1","name":"agent","input":{"messages":[{"type":"human","content":"hi","id":"human-r1"}]},"triggers":["start:agent"]}`, string(debugs[0].Payload))
	require.Contains(t, string(debugs[1].Payload), `"result":[["messages",[{"type":"ai","content":"It is noon","id":"ai-r1-1"}]]]`)
	require.Contains(t, string(debugs[2].Payload), `"checkpoint_id":"r1"`)

	out, end := run.Render(wire.EventFailed, data(t, wire.ErrorData{EventBase: base, Error: "boom"}))
	require.True(t, end)
	require.Equal(t, []string{"debug", "error"}, names(out))
	require.Contains(t, string(out[0].Data), `"error":"boom"`)

	// tasks, checkpoints and tools are parts of the same, each alone.
	parts := &render.Run{RunID: "r1", ThreadID: "t1", Input: "hi", Modes: []render.Mode{render.ModeTasks, render.ModeCheckpoints, render.ModeTools}}
	var got []string
	for _, ev := range []struct {
		typ wire.EventType
		v   any
	}{
		{wire.EventStarted, base},
		{wire.EventToolCall, wire.ToolCallData{EventBase: base, CallID: "c1", Name: "clock"}},
		{wire.EventToolResult, wire.ToolResultData{EventBase: base, CallID: "c1", Error: "no clock"}},
		{wire.EventCompleted, wire.CompletedData{EventBase: base, Output: wire.Output{Text: "x"}}},
	} {
		out, _ := parts.Render(ev.typ, data(t, ev.v))
		for _, e := range out {
			got = append(got, e.Name+" "+string(e.Data))
		}
	}
	require.Len(t, got, 6)
	require.True(t, strings.HasPrefix(got[0], `tasks {"id":"task-r1-1","input"`), got[0])
	require.JSONEq(t, `{"event":"on_tool_start","toolCallId":"c1","name":"clock","input":{}}`, strings.TrimPrefix(got[1], "tools "))
	require.JSONEq(t, `{"event":"on_tool_error","toolCallId":"c1","error":"no clock"}`, strings.TrimPrefix(got[2], "tools "))
	require.True(t, strings.HasPrefix(got[3], `tasks {"error":null,"id":"task-r1-1"`), got[3])
	require.True(t, strings.HasPrefix(got[4], `checkpoints {"config"`), got[4])
	require.Equal(t, "end null", got[5])
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
