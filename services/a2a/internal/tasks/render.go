package tasks

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/turnstile-run/turnstile/pkg/a2atask"
	"github.com/turnstile-run/turnstile/pkg/frontdoor"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

// errStreamLost ends a stream whose history after the client's cursor is gone (the native
// stream.reset), or whose cursor names an event the turn does not have.
var errStreamLost = fmt.Errorf("the task's event history after this cursor is gone; read the task with tasks/get: %w", a2a.ErrServerError)

// errRevoked ends a stream whose credential was revoked (the native stream.revoked).
var errRevoked = fmt.Errorf("the credential of this stream was revoked: %w", a2a.ErrServerError)

// tagged is one A2A event with its SSE id.
type tagged struct {
	id string
	ev a2a.Event
}

// renderer renders one turn's native events as A2A events of its task, and keeps what they say of
// the task (its state and the turn's text), so a blocking send answers without reading Postgres.
type renderer struct {
	task      a2a.TaskID
	contextID string
	turnID    string
	// state is the task's state as the events left it; text is the current attempt's words.
	state a2a.TaskState
	text  strings.Builder
	final *a2a.TaskStatus
	// failure is the error of a failed turn.
	failure string
}

func newRenderer(task a2a.TaskID, contextID, turnID string) *renderer {
	return &renderer{task: task, contextID: contextID, turnID: turnID, state: a2a.TaskStateSubmitted}
}

// render returns the A2A events of one native event, each with its SSE id (see doc.go), and
// whether the event ended the task's stream.
func (r *renderer) render(ev frontdoor.Event) ([]tagged, bool, error) {
	var base wire.EventBase
	_ = json.Unmarshal(ev.Data, &base)
	meta := func(extra ...any) map[string]any {
		m := map[string]any{"turnstile/attempt": base.Attempt}
		for i := 0; i+1 < len(extra); i += 2 {
			m[extra[i].(string)] = extra[i+1]
		}
		return m
	}
	var evs []a2a.Event
	done := false
	switch ev.Type {
	case wire.EventStarted:
		evs = append(evs, r.status(a2a.TaskStateWorking, nil, meta()))
	case wire.EventRetrying:
		var d wire.RetryingData
		_ = json.Unmarshal(ev.Data, &d)
		r.text.Reset()
		evs = append(evs, r.status(a2a.TaskStateWorking, nil, meta("turnstile/retrying", true, "turnstile/previous_attempt", d.PreviousAttempt)))
	case wire.EventWaiting:
		var d wire.WaitingData
		_ = json.Unmarshal(ev.Data, &d)
		m := meta("turnstile/waiting", d.Reason)
		if !d.RetryAt.IsZero() {
			m["turnstile/retry_at"] = d.RetryAt.Format(time.RFC3339Nano)
		}
		evs = append(evs, r.status(a2a.TaskStateWorking, nil, m))
	case wire.EventDelta:
		var d wire.DeltaData
		_ = json.Unmarshal(ev.Data, &d)
		if d.Index == 0 {
			r.text.Reset()
		}
		r.text.WriteString(d.Text)
		evs = append(evs, &a2a.TaskArtifactUpdateEvent{
			TaskID: r.task, ContextID: r.contextID, Append: d.Index > 0, Metadata: meta("turnstile/index", d.Index),
			Artifact: &a2a.Artifact{ID: a2atask.ArtifactID(r.turnID), Name: "response", Parts: a2a.ContentParts{a2a.TextPart{Text: d.Text}}},
		})
	case wire.EventToolCall:
		var d wire.ToolCallData
		_ = json.Unmarshal(ev.Data, &d)
		call := map[string]any{"call_id": d.CallID, "name": d.Name, "arguments": rawValue(d.Arguments)}
		if d.IdempotencyKey != "" {
			call["idempotency_key"] = d.IdempotencyKey
		}
		evs = append(evs, r.status(a2a.TaskStateWorking, r.dataMessage("tool_call", call, d.CallID), meta()))
	case wire.EventToolResult:
		var d wire.ToolResultData
		_ = json.Unmarshal(ev.Data, &d)
		res := map[string]any{"call_id": d.CallID, "result": rawValue(d.Result)}
		if d.Error != "" {
			res["error"] = d.Error
		}
		evs = append(evs, r.status(a2a.TaskStateWorking, r.dataMessage("tool_result", res, d.CallID), meta()))
	case wire.EventCompleted:
		var d wire.CompletedData
		_ = json.Unmarshal(ev.Data, &d)
		r.text.Reset()
		r.text.WriteString(d.Output.Text)
		state := a2atask.EndState(d.Output.State)
		var msg *a2a.Message
		if a2atask.Interrupted(state) && d.Output.Text != "" {
			msg = a2atask.AgentMessage(r.task, r.contextID, "status-"+r.turnID, d.Output.Text)
		}
		evs = append(evs, &a2a.TaskArtifactUpdateEvent{
			TaskID: r.task, ContextID: r.contextID, LastChunk: true, Metadata: meta(),
			Artifact: &a2a.Artifact{ID: a2atask.ArtifactID(r.turnID), Name: "response", Parts: a2a.ContentParts{a2a.TextPart{Text: d.Output.Text}}},
		}, r.finalStatus(state, msg, meta()))
		done = true
	case wire.EventFailed, wire.EventCancelled, wire.EventExpired:
		var d wire.ErrorData
		_ = json.Unmarshal(ev.Data, &d)
		state := a2a.TaskStateFailed
		if ev.Type == wire.EventCancelled {
			state = a2a.TaskStateCanceled
		}
		var msg *a2a.Message
		if d.Error != "" {
			r.failure = d.Error
			msg = a2atask.AgentMessage(r.task, r.contextID, "status-"+r.turnID, d.Error)
		}
		evs = append(evs, r.finalStatus(state, msg, meta()))
		done = true
	case wire.EventStreamReset:
		return nil, true, errStreamLost
	case wire.EventStreamRevoked:
		return nil, true, errRevoked
	default:
		// An event type this front door does not know yet says nothing of the task.
		return nil, false, nil
	}
	return tag(ev.ID, evs), done, nil
}

// tag gives each of one native event's A2A events its SSE id: the last gets the native id, an
// earlier one k gets "<native id>~k", and each repeats it in its metadata.
func tag(nativeID string, evs []a2a.Event) []tagged {
	out := make([]tagged, len(evs))
	for k, ev := range evs {
		id := nativeID
		if k < len(evs)-1 {
			id = nativeID + "~" + strconv.Itoa(k)
		}
		switch e := ev.(type) {
		case *a2a.TaskStatusUpdateEvent:
			e.Metadata = withID(e.Metadata, id)
		case *a2a.TaskArtifactUpdateEvent:
			e.Metadata = withID(e.Metadata, id)
		}
		out[k] = tagged{id: id, ev: ev}
	}
	return out
}

func withID(m map[string]any, id string) map[string]any {
	if m == nil {
		m = map[string]any{}
	}
	m[EventIDKey] = id
	return m
}

// cursor is a resume position: after the native event id, and within it after its expansion k
// (-1: after all of it).
type cursor struct {
	native string
	k      int
}

// parseCursor reads a Last-Event-ID this front door wrote; "" and startID mean the turn's start.
func parseCursor(s string) (cursor, error) {
	if s == "" || s == startID {
		return cursor{k: -1}, nil
	}
	native, ks, found := strings.Cut(s, "~")
	if !found {
		return cursor{native: s, k: -1}, nil
	}
	k, err := strconv.Atoi(ks)
	if err != nil || k < 0 || native == "" {
		return cursor{}, errors.New("malformed Last-Event-ID")
	}
	return cursor{native: native, k: k}, nil
}

func (r *renderer) status(state a2a.TaskState, msg *a2a.Message, meta map[string]any) *a2a.TaskStatusUpdateEvent {
	r.state = state
	now := time.Now().UTC()
	return &a2a.TaskStatusUpdateEvent{
		TaskID: r.task, ContextID: r.contextID, Metadata: meta,
		Status: a2a.TaskStatus{State: state, Message: msg, Timestamp: &now},
	}
}

func (r *renderer) finalStatus(state a2a.TaskState, msg *a2a.Message, meta map[string]any) *a2a.TaskStatusUpdateEvent {
	e := r.status(state, msg, meta)
	e.Final = true
	st := e.Status
	r.final = &st
	return e
}

func (r *renderer) dataMessage(kind string, v map[string]any, callID string) *a2a.Message {
	return &a2a.Message{
		ID: kind + "-" + r.turnID + "-" + callID, TaskID: r.task, ContextID: r.contextID, Role: a2a.MessageRoleAgent,
		Parts: a2a.ContentParts{a2a.DataPart{Data: map[string]any{kind: v}}},
	}
}

// rawValue decodes raw JSON for a data part (nil when empty or not JSON).
func rawValue(raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return nil
	}
	return v
}
