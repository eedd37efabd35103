package uistream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/turnstile-run/turnstile/pkg/wire"
)

// Part is one UI message stream part, marshalled as the JSON of one SSE `data:` line.
type Part map[string]any

// Type is the part's `type`.
func (p Part) Type() string { s, _ := p["type"].(string); return s }

// unit is one thing an attempt shows: a delta's text, a tool call or a tool result. Attempts are
// compared unit by unit (see Renderer).
type unit struct {
	kind string
	key  string
}

// Renderer turns one turn's native events, in stream order, into UI message stream parts. It is
// not safe for concurrent use; a stream owns one.
type Renderer struct {
	turnID string
	// started says `start` was emitted; done says a terminal part was.
	started, done bool
	// shown are the units the client shows, in order; cur are the current attempt's units so far;
	// diverged says the current attempt showed something other than shown at some unit.
	shown, cur []unit
	diverged   bool
	// split says the current attempt just diverged: the open text part ends before its next delta.
	split bool
	// textOpen says a text part is open, named textID; texts counts the text parts opened.
	textOpen bool
	textID   string
	texts    int
}

// NewRenderer renders the turn turnID (the ID the client sees; it names the assistant message).
func NewRenderer(turnID string) *Renderer { return &Renderer{turnID: turnID} }

// Done reports whether a terminal part (finish, error or abort) was rendered: the stream is over.
func (r *Renderer) Done() bool { return r.done }

// Render returns the parts for the next event of the turn. Events of other turns, and events
// after the turn ended, render nothing. A malformed payload is an error.
func (r *Renderer) Render(typ wire.EventType, data json.RawMessage) ([]Part, error) {
	if r.done {
		return nil, nil
	}
	var base wire.EventBase
	if len(data) > 0 && typ != wire.EventStreamReset && typ != wire.EventStreamRevoked {
		if err := json.Unmarshal(data, &base); err != nil {
			return nil, fmt.Errorf("decode %s: %w", typ, err)
		}
		if base.TurnID != "" && base.TurnID != r.turnID {
			return nil, nil
		}
	}
	var out []Part
	switch typ {
	case wire.EventStarted:
		out = r.start(out)
	case wire.EventRetrying:
		out = r.start(out)
		if r.diverged {
			r.shown = r.cur
		}
		r.cur, r.diverged = nil, false
		out = append(out, Part{
			"type": "data-turnstile", "transient": true,
			"data": map[string]any{"event": string(typ), "attempt": base.Attempt},
		})
	case wire.EventDelta:
		var d wire.DeltaData
		if err := json.Unmarshal(data, &d); err != nil {
			return nil, fmt.Errorf("decode %s: %w", typ, err)
		}
		out = r.start(out)
		if !r.consume(unit{"delta", d.Text}) {
			return out, nil
		}
		if r.split {
			out, r.split = r.closeText(out), false
		}
		if !r.textOpen {
			r.texts++
			r.textOpen, r.textID = true, r.turnID+"-text-"+strconv.Itoa(r.texts)
			out = append(out, Part{"type": "text-start", "id": r.textID})
		}
		out = append(out, Part{"type": "text-delta", "id": r.textID, "delta": d.Text})
	case wire.EventToolCall:
		var d wire.ToolCallData
		if err := json.Unmarshal(data, &d); err != nil {
			return nil, fmt.Errorf("decode %s: %w", typ, err)
		}
		out = r.start(out)
		if !r.consume(unit{"call", d.CallID + "\x00" + d.Name + "\x00" + compact(d.Arguments)}) {
			return out, nil
		}
		out, r.split = r.closeText(out), false
		input := json.RawMessage(d.Arguments)
		if len(bytes.TrimSpace(input)) == 0 {
			input = json.RawMessage(`{}`)
		}
		out = append(out, Part{
			"type": "tool-input-available", "toolCallId": d.CallID, "toolName": d.Name,
			"input": input, "providerExecuted": true, "dynamic": true,
		})
	case wire.EventToolResult:
		var d wire.ToolResultData
		if err := json.Unmarshal(data, &d); err != nil {
			return nil, fmt.Errorf("decode %s: %w", typ, err)
		}
		out = r.start(out)
		if !r.consume(unit{"result", d.CallID + "\x00" + d.Error + "\x00" + compact(d.Result)}) {
			return out, nil
		}
		out, r.split = r.closeText(out), false
		if d.Error != "" {
			out = append(out, Part{
				"type": "tool-output-error", "toolCallId": d.CallID, "errorText": d.Error,
				"providerExecuted": true, "dynamic": true,
			})
			break
		}
		output := json.RawMessage(d.Result)
		if len(bytes.TrimSpace(output)) == 0 {
			output = json.RawMessage(`null`)
		}
		out = append(out, Part{
			"type": "tool-output-available", "toolCallId": d.CallID, "output": output,
			"providerExecuted": true, "dynamic": true,
		})
	case wire.EventCompleted:
		out = r.closeText(r.start(out))
		out = append(out, Part{"type": "finish", "finishReason": "stop"})
		r.done = true
	case wire.EventFailed, wire.EventExpired:
		var d wire.ErrorData
		if err := json.Unmarshal(data, &d); err != nil {
			return nil, fmt.Errorf("decode %s: %w", typ, err)
		}
		msg := d.Error
		if msg == "" {
			msg = strings.TrimPrefix(string(typ), "turn.")
		}
		out = r.closeText(r.start(out))
		out = append(out, Part{"type": "error", "errorText": string(typ) + ": " + msg})
		r.done = true
	case wire.EventCancelled:
		var d wire.ErrorData
		if err := json.Unmarshal(data, &d); err != nil {
			return nil, fmt.Errorf("decode %s: %w", typ, err)
		}
		out = r.closeText(r.start(out))
		reason := d.Error
		if reason == "" {
			reason = "cancelled"
		}
		out = append(out, Part{"type": "abort", "reason": reason})
		r.done = true
	case wire.EventStreamReset:
		// The turn's history went with the Redis stream that held it: the answer cannot be
		// rebuilt from the stream, so the client is told to read the chat again.
		out = r.closeText(r.start(out))
		out = append(out, Part{"type": "error", "errorText": "stream.reset: the turn's events are no longer retained; reload the chat"})
		r.done = true
	case wire.EventStreamRevoked:
		out = r.closeText(r.start(out))
		out = append(out, Part{"type": "error", "errorText": "stream.revoked: the API key was revoked"})
		r.done = true
	}
	return out, nil
}

// start emits the `start` part once, before anything else; its messageId is the turn ID, so a
// replayed stream names the same assistant message.
func (r *Renderer) start(out []Part) []Part {
	if r.started {
		return out
	}
	r.started = true
	return append(out, Part{
		"type": "start", "messageId": r.turnID,
		"messageMetadata": map[string]any{"turn_id": r.turnID},
	})
}

func (r *Renderer) closeText(out []Part) []Part {
	if !r.textOpen {
		return out
	}
	r.textOpen = false
	return append(out, Part{"type": "text-end", "id": r.textID})
}

// consume records u as the current attempt's next unit and reports whether it is to be shown:
// not while the attempt repeats what is shown, and always once it has diverged from it.
func (r *Renderer) consume(u unit) bool {
	k := len(r.cur)
	r.cur = append(r.cur, u)
	if r.diverged {
		return true
	}
	if k < len(r.shown) {
		if r.shown[k] == u {
			return false
		}
		// Something other than what is shown: the text shown so far stays, and the rest of this
		// attempt follows in a new text part.
		r.diverged, r.split = true, true
		return true
	}
	r.shown = append(r.shown, u)
	return true
}

func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}
