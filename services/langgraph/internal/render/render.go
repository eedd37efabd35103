package render

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/turnstile-run/turnstile/pkg/wire"
)

// Mode is a LangGraph stream mode.
type Mode string

// The stream modes rendered.
const (
	ModeValues        Mode = "values"
	ModeMessagesTuple Mode = "messages-tuple"
	ModeUpdates       Mode = "updates"
	// ModeCustom relays the agent's own events (turn.custom) as "custom" events carrying their
	// data, in order with the run's other events.
	ModeCustom Mode = "custom"
	// ModeEvents renders the run as LangChain's streamed events (astream_events v2, each an
	// "events" event): on_chain_start and on_chain_end of the agent node around its attempt,
	// on_chat_model_stream per delta, on_tool_start / on_tool_end per tool call and result, and
	// on_custom_event per custom event.
	ModeEvents Mode = "events"
	// ModeDebug renders the run as LangGraph's debug stream (each a "debug" event): a task of the
	// agent node when an attempt starts, its task_result and the checkpoint after it when the run
	// ends. The events carry no timestamp: a stream renders the same on every resume.
	ModeDebug Mode = "debug"
	// ModeTasks and ModeCheckpoints are the debug stream's task and checkpoint payloads alone,
	// as "tasks" and "checkpoints" events.
	ModeTasks       Mode = "tasks"
	ModeCheckpoints Mode = "checkpoints"
	// ModeTools renders tool calls and results as "tools" events (on_tool_start, on_tool_end or
	// on_tool_error, with toolCallId and name), what useStream's toolProgress reads.
	ModeTools Mode = "tools"
)

// modeList names the modes rendered, for refusals.
const modeList = "values, messages-tuple, updates, custom, events, debug, tasks, checkpoints and tools"

// NodeName is the graph node the agent's answer is attributed to in updates and message metadata.
const NodeName = "agent"

// ErrUnsupportedMode is a stream mode this front door does not render.
var ErrUnsupportedMode = errors.New("unsupported stream mode")

// ParseModes reads a run's stream_mode: absent means values (LangGraph's default), a string is one
// mode, a list is several; duplicates collapse. Modes outside modeList are an ErrUnsupportedMode
// naming them.
func ParseModes(raw json.RawMessage) ([]Mode, error) {
	var names []string
	switch s := strings.TrimSpace(string(raw)); {
	case s == "" || s == "null":
		return []Mode{ModeValues}, nil
	case strings.HasPrefix(s, "["):
		if err := json.Unmarshal(raw, &names); err != nil {
			return nil, fmt.Errorf("stream_mode: must be a string or a list of strings")
		}
	default:
		var one string
		if err := json.Unmarshal(raw, &one); err != nil {
			return nil, fmt.Errorf("stream_mode: must be a string or a list of strings")
		}
		names = []string{one}
	}
	var modes []Mode
	seen := map[Mode]bool{}
	for _, n := range names {
		m := Mode(n)
		switch m {
		case ModeValues, ModeMessagesTuple, ModeUpdates, ModeCustom, ModeEvents, ModeDebug, ModeTasks, ModeCheckpoints, ModeTools:
		case "messages":
			return nil, fmt.Errorf("%w %q: turnstile streams messages as messages-tuple (what the SDK asks for); it renders %s", ErrUnsupportedMode, n, modeList)
		default:
			return nil, fmt.Errorf("%w %q: turnstile renders %s", ErrUnsupportedMode, n, modeList)
		}
		if !seen[m] {
			seen[m] = true
			modes = append(modes, m)
		}
	}
	if len(modes) == 0 {
		return []Mode{ModeValues}, nil
	}
	return modes, nil
}

// Message is a LangGraph message as the SDK reads it from values, updates and history.
type Message struct {
	Type       string     `json:"type"` // human, ai, tool
	Content    string     `json:"content"`
	ID         string     `json:"id"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// ToolCall is one tool call of an AI message.
type ToolCall struct {
	ID   string          `json:"id"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
	Type string          `json:"type"` // always "tool_call"
}

// HumanMessageID names the human message of a run's input.
func HumanMessageID(runID string) string { return "human-" + runID }

// AIMessageID names the AI message one attempt of a run streams; the run's answer is the one of
// its last attempt.
func AIMessageID(runID string, attempt int) string { return fmt.Sprintf("ai-%s-%d", runID, attempt) }

// Turn is what rendering needs of one turn: its ID as the client knows it, status, final attempt,
// input text and output text (empty when absent).
type Turn struct {
	ID      string
	Status  wire.Status
	Attempt int
	Input   string
	Output  string
}

// ThreadMessages lists the messages of a thread's turns, given oldest first: each turn's input
// as a human message (when known) and each succeeded turn's output as an AI message.
func ThreadMessages(turns []Turn) []Message {
	out := make([]Message, 0, 2*len(turns))
	for _, t := range turns {
		out = append(out, TurnMessages(t)...)
	}
	return out
}

// TurnMessages is one turn's messages (see ThreadMessages).
func TurnMessages(t Turn) []Message {
	var out []Message
	if t.Input != "" {
		out = append(out, Message{Type: "human", Content: t.Input, ID: HumanMessageID(t.ID)})
	}
	if t.Status == wire.StatusSucceeded {
		out = append(out, Message{Type: "ai", Content: t.Output, ID: AIMessageID(t.ID, max(t.Attempt, 1))})
	}
	return out
}

// Event is one LangGraph SSE event: its name and JSON data.
type Event struct {
	Name string
	Data json.RawMessage
}

// Run is the fixed context a run's events are rendered in.
type Run struct {
	RunID    string
	ThreadID string
	// AssistantID names the assistant in message metadata.
	AssistantID string
	Modes       []Mode
	// Prior is the thread's messages before this run; Input the run's input text.
	Prior []Message
	Input string
}

func (r *Run) has(m Mode) bool {
	for _, x := range r.Modes {
		if x == m {
			return true
		}
	}
	return false
}

// Metadata is the first event of every stream: LangGraph's metadata event with the run ID.
func (r *Run) Metadata(attempt int) Event {
	return event("metadata", map[string]any{"run_id": r.RunID, "attempt": max(attempt, 1)})
}

// Render returns the protocol events one native event becomes, and whether it ends the run's
// stream. It depends on nothing but its arguments and r, so it gives the same answer every time.
func (r *Run) Render(typ wire.EventType, data json.RawMessage) (out []Event, terminal bool) {
	var base wire.EventBase
	_ = json.Unmarshal(data, &base)
	switch typ {
	case wire.EventStarted, wire.EventRetrying:
		if r.has(ModeValues) {
			out = append(out, r.values(nil))
		}
		if r.has(ModeEvents) {
			out = append(out, r.langchain("on_chain_start", NodeName, r.RunID, base.Attempt, map[string]any{"input": r.state(nil)}))
		}
		if r.has(ModeDebug) || r.has(ModeTasks) {
			task := map[string]any{"id": r.taskID(base.Attempt), "name": NodeName, "input": r.state(nil), "triggers": []string{"start:" + NodeName}}
			if r.has(ModeDebug) {
				out = append(out, r.debug("task", task))
			}
			if r.has(ModeTasks) {
				out = append(out, event("tasks", task))
			}
		}
	case wire.EventDelta:
		var d wire.DeltaData
		if err := json.Unmarshal(data, &d); err != nil {
			break
		}
		chunk := map[string]any{
			"type": "AIMessageChunk", "content": d.Text, "id": AIMessageID(r.RunID, d.Attempt),
			"tool_calls": []any{}, "tool_call_chunks": []any{},
		}
		if r.has(ModeMessagesTuple) {
			out = append(out, event("messages", []any{chunk, r.chunkMetadata(d.Attempt)}))
		}
		if r.has(ModeEvents) {
			out = append(out, r.langchain("on_chat_model_stream", NodeName, AIMessageID(r.RunID, d.Attempt), d.Attempt, map[string]any{"chunk": chunk}))
		}
	case wire.EventToolCall:
		var d wire.ToolCallData
		if err := json.Unmarshal(data, &d); err != nil {
			break
		}
		args := d.Arguments
		if len(args) == 0 {
			args = json.RawMessage(`{}`)
		}
		if r.has(ModeEvents) {
			out = append(out, r.langchain("on_tool_start", d.Name, d.CallID, d.Attempt, map[string]any{"input": args}))
		}
		if r.has(ModeTools) {
			out = append(out, event("tools", map[string]any{"event": "on_tool_start", "toolCallId": d.CallID, "name": d.Name, "input": args}))
		}
		if r.has(ModeUpdates) {
			msg := Message{
				Type: "ai", ID: AIMessageID(r.RunID, d.Attempt) + "-" + d.CallID,
				ToolCalls: []ToolCall{{ID: d.CallID, Name: d.Name, Args: args, Type: "tool_call"}},
			}
			out = append(out, event("updates", map[string]any{NodeName: map[string]any{"messages": []Message{msg}}}))
		}
	case wire.EventToolResult:
		var d wire.ToolResultData
		if err := json.Unmarshal(data, &d); err != nil {
			break
		}
		if r.has(ModeUpdates) {
			msg := Message{Type: "tool", ID: "tool-" + r.RunID + "-" + d.CallID, ToolCallID: d.CallID, Content: string(d.Result)}
			out = append(out, event("updates", map[string]any{"tools": map[string]any{"messages": []Message{msg}}}))
		}
		if r.has(ModeEvents) {
			res := d.Result
			if len(res) == 0 {
				res = json.RawMessage("null")
			}
			out = append(out, r.langchain("on_tool_end", "tools", d.CallID, d.Attempt, map[string]any{"output": res, "error": d.Error}))
		}
		if r.has(ModeTools) {
			if d.Error != "" {
				out = append(out, event("tools", map[string]any{"event": "on_tool_error", "toolCallId": d.CallID, "error": d.Error}))
			} else {
				out = append(out, event("tools", map[string]any{"event": "on_tool_end", "toolCallId": d.CallID, "output": d.Result}))
			}
		}
	case wire.EventCustom:
		var d wire.CustomData
		if err := json.Unmarshal(data, &d); err != nil {
			break
		}
		v := d.Data
		if len(v) == 0 {
			v = json.RawMessage("null")
		}
		if r.has(ModeCustom) {
			out = append(out, Event{Name: "custom", Data: v})
		}
		if r.has(ModeEvents) {
			out = append(out, r.langchain("on_custom_event", d.Name, r.RunID, d.Attempt, v))
		}
	case wire.EventCompleted:
		var d wire.CompletedData
		_ = json.Unmarshal(data, &d)
		attempt := max(d.Attempt, 1)
		ai := Message{Type: "ai", Content: d.Output.Text, ID: AIMessageID(r.RunID, attempt)}
		if r.has(ModeUpdates) {
			out = append(out, event("updates", map[string]any{NodeName: map[string]any{"messages": []Message{ai}}}))
		}
		if r.has(ModeEvents) {
			out = append(out, r.langchain("on_chain_end", NodeName, r.RunID, attempt, map[string]any{"output": map[string]any{"messages": []Message{ai}}}))
		}
		if r.has(ModeDebug) {
			out = append(out, r.debug("task_result", r.taskResult(attempt, ai)), r.debug("checkpoint", r.checkpoint(ai)))
		}
		if r.has(ModeTasks) {
			out = append(out, event("tasks", r.taskResult(attempt, ai)))
		}
		if r.has(ModeCheckpoints) {
			out = append(out, event("checkpoints", r.checkpoint(ai)))
		}
		if r.has(ModeValues) {
			out = append(out, r.values(&ai))
		}
		return append(out, event("end", nil)), true
	case wire.EventCancelled:
		// An interrupted run ends its stream without an error; its status says interrupted.
		return []Event{event("end", nil)}, true
	case wire.EventFailed:
		var d wire.ErrorData
		_ = json.Unmarshal(data, &d)
		result := map[string]any{"id": r.taskID(max(d.Attempt, 1)), "name": NodeName, "error": d.Error, "result": []any{}, "interrupts": []any{}}
		if r.has(ModeDebug) {
			out = append(out, r.debug("task_result", result))
		}
		if r.has(ModeTasks) {
			out = append(out, event("tasks", result))
		}
		return append(out, errorEvent("AgentError", d.Error)), true
	case wire.EventExpired:
		var d wire.ErrorData
		_ = json.Unmarshal(data, &d)
		return []Event{errorEvent("TimeoutError", "the run's deadline passed: "+d.Error)}, true
	case wire.EventStreamReset:
		return []Event{errorEvent("StreamReset",
			"the run's events before this point are no longer retained; read the thread's state (GET /threads/{thread_id}/state)")}, true
	case wire.EventStreamRevoked:
		return []Event{errorEvent("Unauthorized", "the API key of this stream was revoked")}, true
	}
	return out, false
}

func (r *Run) values(answer *Message) Event { return event("values", r.state(answer)) }

// state is the thread's values during the run: its messages before, the run's input and, once
// known, the answer.
func (r *Run) state(answer *Message) map[string]any {
	msgs := append([]Message{}, r.Prior...)
	if r.Input != "" {
		msgs = append(msgs, Message{Type: "human", Content: r.Input, ID: HumanMessageID(r.RunID)})
	}
	if answer != nil {
		msgs = append(msgs, *answer)
	}
	return map[string]any{"messages": msgs}
}

// langchain is one "events" event: LangChain's StreamEvent (astream_events v2) of the named
// runnable, its run ID id.
func (r *Run) langchain(kind, name, id string, attempt int, data any) Event {
	parents := []string{}
	if id != r.RunID {
		parents = append(parents, r.RunID)
	}
	return event("events", map[string]any{
		"event": kind, "name": name, "run_id": id, "data": data,
		"metadata": r.chunkMetadata(attempt), "tags": []string{}, "parent_ids": parents,
	})
}

// debug is one "debug" event of step 1 (the agent node's one step per run).
func (r *Run) debug(kind string, payload any) Event {
	return event("debug", map[string]any{"type": kind, "step": 1, "payload": payload})
}

// taskResult is the agent node's task_result of the attempt that answered ai.
func (r *Run) taskResult(attempt int, ai Message) map[string]any {
	return map[string]any{
		"id": r.taskID(attempt), "name": NodeName, "error": nil,
		"result": []any{[]any{"messages", []Message{ai}}}, "interrupts": []any{},
	}
}

// checkpoint is the thread's checkpoint after the run answered ai.
func (r *Run) checkpoint(ai Message) map[string]any {
	return map[string]any{
		"config":   map[string]any{"configurable": map[string]any{"thread_id": r.ThreadID, "checkpoint_ns": "", "checkpoint_id": r.RunID}},
		"values":   r.state(&ai),
		"metadata": map[string]any{"source": "loop", "step": 1, "run_id": r.RunID},
		"next":     []string{}, "tasks": []any{},
	}
}

// taskID names the agent node's task of one attempt.
func (r *Run) taskID(attempt int) string { return fmt.Sprintf("task-%s-%d", r.RunID, max(attempt, 1)) }

func (r *Run) chunkMetadata(attempt int) map[string]any {
	return map[string]any{
		"run_id": r.RunID, "thread_id": r.ThreadID, "assistant_id": r.AssistantID,
		"graph_id": r.AssistantID, "langgraph_node": NodeName, "langgraph_step": 1, "attempt": max(attempt, 1),
	}
}

func errorEvent(name, message string) Event {
	return event("error", map[string]string{"error": name, "message": message})
}

func event(name string, v any) Event {
	b, err := json.Marshal(v)
	if err != nil {
		// Every value above is built of strings, numbers and raw JSON already validated.
		b = []byte("null")
	}
	return Event{Name: name, Data: b}
}
