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
)

// NodeName is the graph node the agent's answer is attributed to in updates and message metadata.
const NodeName = "agent"

// ErrUnsupportedMode is a stream mode this front door does not render.
var ErrUnsupportedMode = errors.New("unsupported stream mode")

// ParseModes reads a run's stream_mode: absent means values (LangGraph's default), a string is one
// mode, a list is several; duplicates collapse. Modes outside values, messages-tuple, updates and
// custom are an ErrUnsupportedMode naming them.
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
		case ModeValues, ModeMessagesTuple, ModeUpdates, ModeCustom:
		case "events", "debug":
			return nil, fmt.Errorf("%w %q: turnstile's runs are not LangGraph graphs, so it has nothing to send in that mode; it renders values, messages-tuple, updates and custom", ErrUnsupportedMode, n)
		default:
			return nil, fmt.Errorf("%w %q: turnstile renders values, messages-tuple, updates and custom", ErrUnsupportedMode, n)
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
	case wire.EventDelta:
		var d wire.DeltaData
		if err := json.Unmarshal(data, &d); err == nil && r.has(ModeMessagesTuple) {
			chunk := map[string]any{
				"type": "AIMessageChunk", "content": d.Text, "id": AIMessageID(r.RunID, d.Attempt),
				"tool_calls": []any{}, "tool_call_chunks": []any{},
			}
			out = append(out, event("messages", []any{chunk, r.chunkMetadata(d.Attempt)}))
		}
	case wire.EventToolCall:
		var d wire.ToolCallData
		if err := json.Unmarshal(data, &d); err == nil && r.has(ModeUpdates) {
			args := d.Arguments
			if len(args) == 0 {
				args = json.RawMessage(`{}`)
			}
			msg := Message{
				Type: "ai", ID: AIMessageID(r.RunID, d.Attempt) + "-" + d.CallID,
				ToolCalls: []ToolCall{{ID: d.CallID, Name: d.Name, Args: args, Type: "tool_call"}},
			}
			out = append(out, event("updates", map[string]any{NodeName: map[string]any{"messages": []Message{msg}}}))
		}
	case wire.EventToolResult:
		var d wire.ToolResultData
		if err := json.Unmarshal(data, &d); err == nil && r.has(ModeUpdates) {
			msg := Message{Type: "tool", ID: "tool-" + r.RunID + "-" + d.CallID, ToolCallID: d.CallID, Content: string(d.Result)}
			out = append(out, event("updates", map[string]any{"tools": map[string]any{"messages": []Message{msg}}}))
		}
	case wire.EventCustom:
		var d wire.CustomData
		if err := json.Unmarshal(data, &d); err == nil && r.has(ModeCustom) {
			v := d.Data
			if len(v) == 0 {
				v = json.RawMessage("null")
			}
			out = append(out, Event{Name: "custom", Data: v})
		}
	case wire.EventCompleted:
		var d wire.CompletedData
		_ = json.Unmarshal(data, &d)
		ai := Message{Type: "ai", Content: d.Output.Text, ID: AIMessageID(r.RunID, max(d.Attempt, 1))}
		if r.has(ModeUpdates) {
			out = append(out, event("updates", map[string]any{NodeName: map[string]any{"messages": []Message{ai}}}))
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
		return []Event{errorEvent("AgentError", d.Error)}, true
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

func (r *Run) values(answer *Message) Event {
	msgs := append([]Message{}, r.Prior...)
	if r.Input != "" {
		msgs = append(msgs, Message{Type: "human", Content: r.Input, ID: HumanMessageID(r.RunID)})
	}
	if answer != nil {
		msgs = append(msgs, *answer)
	}
	return event("values", map[string]any{"messages": msgs})
}

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
