package a2atask

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/turnstile-run/turnstile/pkg/a2apb"
	"github.com/turnstile-run/turnstile/pkg/region"
	"github.com/turnstile-run/turnstile/pkg/turnstore"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

// MetadataKey is the turn metadata member that ties a turn to its A2A task and message:
// {"a2a": {"task_id": "<first turn's id>", "message_id": "<messageId>"}}. A first turn carries no
// task_id (it is its own task).
const MetadataKey = turnstore.TaskLinkKey

// Link is what a turn's metadata says of its task.
type Link struct {
	TaskID    string `json:"task_id,omitempty"`
	MessageID string `json:"message_id,omitempty"`
}

// LinkOf reads a turn's A2A link; a turn without one is its own task.
func LinkOf(t turnstore.Shown) Link {
	var md struct {
		A2A Link `json:"a2a"`
	}
	if len(t.Metadata) > 0 {
		_ = json.Unmarshal(t.Metadata, &md)
	}
	return md.A2A
}

// Output reads a turn's output.
func Output(t turnstore.Shown) wire.Output {
	var o wire.Output
	if len(t.Output) > 0 {
		_ = json.Unmarshal(t.Output, &o)
	}
	return o
}

// Input reads a turn's input text.
func Input(t turnstore.Shown) string {
	var in wire.Input
	if len(t.Input) > 0 {
		_ = json.Unmarshal(t.Input, &in)
	}
	return in.Text
}

// State maps a turn's status (and a succeeded turn's output state) to a task state.
func State(status wire.Status, outputState string) a2a.TaskState {
	switch status {
	case wire.StatusQueued:
		return a2a.TaskStateSubmitted
	case wire.StatusRunning:
		return a2a.TaskStateWorking
	case wire.StatusSucceeded:
		return EndState(outputState)
	case wire.StatusCancelled:
		return a2a.TaskStateCanceled
	case wire.StatusFailed, wire.StatusExpired:
		return a2a.TaskStateFailed
	}
	return a2a.TaskStateUnknown
}

// EndState is the task state of a succeeded turn whose output has state s.
func EndState(s string) a2a.TaskState {
	switch s {
	case wire.OutputInputRequired:
		return a2a.TaskStateInputRequired
	case wire.OutputAuthRequired:
		return a2a.TaskStateAuthRequired
	}
	return a2a.TaskStateCompleted
}

// Interrupted reports whether a task waits for its user.
func Interrupted(s a2a.TaskState) bool {
	return s == a2a.TaskStateInputRequired || s == a2a.TaskStateAuthRequired
}

// Ended reports whether a task's stream is over: terminal or waiting for the user.
func Ended(s a2a.TaskState) bool { return s.Terminal() || Interrupted(s) }

// ArtifactID is the ID of a turn's response artifact.
func ArtifactID(turnID string) a2a.ArtifactID { return a2a.ArtifactID("response-" + turnID) }

// AgentMessage is a message of the agent with one text part.
func AgentMessage(task a2a.TaskID, contextID, id, text string) *a2a.Message {
	return &a2a.Message{
		ID: id, TaskID: task, ContextID: contextID, Role: a2a.MessageRoleAgent,
		Parts: a2a.ContentParts{a2a.TextPart{Text: text}},
	}
}

// UserMessage is the user's message of a turn.
func UserMessage(task a2a.TaskID, contextID, id, text string) *a2a.Message {
	return &a2a.Message{
		ID: id, TaskID: task, ContextID: contextID, Role: a2a.MessageRoleUser,
		Parts: a2a.ContentParts{a2a.TextPart{Text: text}},
	}
}

// Status is a turn's task status: its state, with the agent's words when it waits for the user
// and the error when it failed, stamped with the turn's end when it ended.
func Status(task a2a.TaskID, t turnstore.Shown) a2a.TaskStatus {
	out := Output(t)
	st := a2a.TaskStatus{State: State(t.Status, out.State)}
	switch {
	case Interrupted(st.State) && out.Text != "":
		st.Message = AgentMessage(task, t.SessionID, "status-"+t.TurnID, out.Text)
	case t.Error != "" && st.State.Terminal():
		st.Message = AgentMessage(task, t.SessionID, "status-"+t.TurnID, t.Error)
	}
	if t.FinishedAt != nil {
		ts := *t.FinishedAt
		st.Timestamp = &ts
	}
	return st
}

// Build is the task made of turns (oldest first, the first is the task's own), its status the
// latest turn's, its history cut to the newest historyLength messages when that is set.
func Build(turns []turnstore.Shown, historyLength *int) *a2a.Task {
	first, last := turns[0], turns[len(turns)-1]
	id := a2a.TaskID(first.TurnID)
	task := &a2a.Task{ID: id, ContextID: first.SessionID, Status: Status(id, last)}
	for _, t := range turns {
		tid := t.TurnID
		if text := Input(t); text != "" {
			mid := LinkOf(t).MessageID
			if mid == "" {
				mid = "user-" + tid
			}
			task.History = append(task.History, UserMessage(id, t.SessionID, mid, text))
		}
		if out := Output(t); out.Text != "" {
			task.History = append(task.History, AgentMessage(id, t.SessionID, "agent-"+tid, out.Text))
			task.Artifacts = append(task.Artifacts, &a2a.Artifact{
				ID: ArtifactID(tid), Name: "response", Parts: a2a.ContentParts{a2a.TextPart{Text: out.Text}},
			})
		}
	}
	task.History = TrimHistory(task.History, historyLength)
	return task
}

// TrimHistory keeps the newest n messages when n is set.
func TrimHistory(h []*a2a.Message, n *int) []*a2a.Message {
	if n == nil || *n >= len(h) {
		return h
	}
	if *n <= 0 {
		return nil
	}
	return h[len(h)-*n:]
}

// Snapshot is an 'a2a' outbox row's payload (migration 00150): the task's turns, oldest first,
// as they were at the status change the row notifies.
type Snapshot struct {
	Turns []turnstore.Shown `json:"turns"`
}

// Push renders an 'a2a' outbox row's payload as the A2A Task POSTed to a push-notification
// config: the task as tasks/get answers it at that change, its IDs in region code's prefixed form
// (pkg/region; code is empty in single-region mode), since the row keeps the bare UUIDs. A
// status without a timestamp (a turn still working) is stamped with at, the time of the change,
// so every notification says when.
func Push(payload []byte, at time.Time, code string) ([]byte, error) {
	task, err := pushTask(payload, at, code)
	if err != nil {
		return nil, err
	}
	return json.Marshal(task)
}

// PushV1 renders an 'a2a-1.0' outbox row's payload (a config created through protocol 1.0) as
// 1.0 POSTs a notification: a StreamResponse (A2A 1.0, section 4.3.3) whose task member is the
// task Push renders, in 1.0's shapes and the proto JSON mapping. The encoding is compacted, as
// the proto JSON encoder varies its spacing between builds: the same row gives the same bytes on
// every attempt, whichever notifier sends it.
func PushV1(payload []byte, at time.Time, code string) ([]byte, error) {
	task, err := pushTask(payload, at, code)
	if err != nil {
		return nil, err
	}
	b, err := a2apb.MarshalJSON(&a2apb.StreamResponse{Payload: &a2apb.StreamResponse_Task{Task: V1Task(task)}})
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// pushTask is the task an outbox row's payload holds, as tasks/get answers it at that change.
func pushTask(payload []byte, at time.Time, code string) (*a2a.Task, error) {
	var s Snapshot
	if err := json.Unmarshal(payload, &s); err != nil {
		return nil, err
	}
	if len(s.Turns) == 0 {
		return nil, errNoTurns
	}
	for i := range s.Turns {
		s.Turns[i].TurnID = region.Prefix(code, s.Turns[i].TurnID)
	}
	task := Build(s.Turns, nil)
	if task.Status.Timestamp == nil {
		ts := at.UTC()
		task.Status.Timestamp = &ts
	}
	return task, nil
}
