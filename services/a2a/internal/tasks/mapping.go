package tasks

import (
	"encoding/json"
	"strings"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/google/uuid"

	"github.com/turnstile-run/turnstile/pkg/frontdoor"
	"github.com/turnstile-run/turnstile/pkg/region"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

// MetadataKey is the turn metadata member that ties a turn to its A2A task and message:
// {"a2a": {"task_id": "<first turn's id>", "message_id": "<messageId>"}}. A first turn carries no
// task_id (it is its own task).
const MetadataKey = "a2a"

// EventIDKey is the metadata key of status and artifact events that repeats the event's SSE id.
const EventIDKey = "turnstile/event_id"

// startID is the SSE id of the Task that opens a stream: a cursor before the turn's first event.
const startID = "0"

// contextNamespace derives the session of a message sent without a contextId from its messageId.
var contextNamespace = uuid.MustParse("5d3c2b7e-8f0a-4e61-9c1d-2a7b4e5f6a80")

// contextFor is the session of a first message without contextId in region code (empty in
// single-region mode): "<region>-<uuidv5 of the messageId>", so a retried first message lands in
// the same session and a router places it by its ID.
func contextFor(code, messageID string) string {
	return region.Prefix(code, uuid.NewSHA1(contextNamespace, []byte(messageID)).String())
}

// turnLink is what a turn's metadata says of its task.
type turnLink struct {
	TaskID    string `json:"task_id,omitempty"`
	MessageID string `json:"message_id,omitempty"`
}

// linkOf reads a turn's A2A link; a turn without one (or not yet claimed, whose row holds no
// metadata) is its own task.
func linkOf(t frontdoor.Turn) turnLink {
	var md struct {
		A2A turnLink `json:"a2a"`
	}
	if len(t.Metadata) > 0 {
		_ = json.Unmarshal(t.Metadata, &md)
	}
	return md.A2A
}

// output reads a turn's output.
func output(t frontdoor.Turn) wire.Output {
	var o wire.Output
	if len(t.Output) > 0 {
		_ = json.Unmarshal(t.Output, &o)
	}
	return o
}

// input reads a turn's input text ("" until a worker claimed it).
func input(t frontdoor.Turn) string {
	var in wire.Input
	if len(t.Input) > 0 {
		_ = json.Unmarshal(t.Input, &in)
	}
	return in.Text
}

// stateOf maps a turn's status (and a succeeded turn's output state) to a task state.
func stateOf(status wire.Status, outputState string) a2a.TaskState {
	switch status {
	case wire.StatusQueued:
		return a2a.TaskStateSubmitted
	case wire.StatusRunning:
		return a2a.TaskStateWorking
	case wire.StatusSucceeded:
		return endState(outputState)
	case wire.StatusCancelled:
		return a2a.TaskStateCanceled
	case wire.StatusFailed, wire.StatusExpired:
		return a2a.TaskStateFailed
	}
	return a2a.TaskStateUnknown
}

// endState is the task state of a succeeded turn whose output has state s.
func endState(s string) a2a.TaskState {
	switch s {
	case wire.OutputInputRequired:
		return a2a.TaskStateInputRequired
	case wire.OutputAuthRequired:
		return a2a.TaskStateAuthRequired
	}
	return a2a.TaskStateCompleted
}

// interrupted reports whether a task waits for its user.
func interrupted(s a2a.TaskState) bool {
	return s == a2a.TaskStateInputRequired || s == a2a.TaskStateAuthRequired
}

// ended reports whether a task's stream is over: terminal or waiting for the user.
func ended(s a2a.TaskState) bool { return s.Terminal() || interrupted(s) }

func artifactID(turnID string) a2a.ArtifactID { return a2a.ArtifactID("response-" + turnID) }

// agentMessage is a message of the agent with one text part.
func agentMessage(task a2a.TaskID, contextID, id, text string) *a2a.Message {
	return &a2a.Message{
		ID: id, TaskID: task, ContextID: contextID, Role: a2a.MessageRoleAgent,
		Parts: a2a.ContentParts{a2a.TextPart{Text: text}},
	}
}

// userMessage is the user's message of a turn.
func userMessage(task a2a.TaskID, contextID, id, text string) *a2a.Message {
	return &a2a.Message{
		ID: id, TaskID: task, ContextID: contextID, Role: a2a.MessageRoleUser,
		Parts: a2a.ContentParts{a2a.TextPart{Text: text}},
	}
}

// statusOf is a turn's task status: its state, with the agent's words when it waits for the user
// and the error when it failed.
func statusOf(task a2a.TaskID, t frontdoor.Turn) a2a.TaskStatus {
	out := output(t)
	st := a2a.TaskStatus{State: stateOf(t.Status, out.State)}
	switch {
	case interrupted(st.State) && out.Text != "":
		st.Message = agentMessage(task, t.SessionID, "status-"+t.TurnID, out.Text)
	case t.Error != "" && st.State.Terminal():
		st.Message = agentMessage(task, t.SessionID, "status-"+t.TurnID, t.Error)
	}
	if t.FinishedAt != nil {
		ts := *t.FinishedAt
		st.Timestamp = &ts
	}
	return st
}

// buildTask is the task made of turns (oldest first, the first is the task's own), its status the
// latest turn's, its history cut to the newest historyLength messages when that is set.
func buildTask(turns []frontdoor.Turn, historyLength *int) *a2a.Task {
	first, last := turns[0], turns[len(turns)-1]
	id := a2a.TaskID(first.TurnID)
	task := &a2a.Task{ID: id, ContextID: first.SessionID, Status: statusOf(id, last)}
	for _, t := range turns {
		tid := t.TurnID
		if text := input(t); text != "" {
			mid := linkOf(t).MessageID
			if mid == "" {
				mid = "user-" + tid
			}
			task.History = append(task.History, userMessage(id, t.SessionID, mid, text))
		}
		if out := output(t); out.Text != "" {
			task.History = append(task.History, agentMessage(id, t.SessionID, "agent-"+tid, out.Text))
			task.Artifacts = append(task.Artifacts, &a2a.Artifact{
				ID: artifactID(tid), Name: "response", Parts: a2a.ContentParts{a2a.TextPart{Text: out.Text}},
			})
		}
	}
	task.History = trimHistory(task.History, historyLength)
	return task
}

// trimHistory keeps the newest n messages when n is set.
func trimHistory(h []*a2a.Message, n *int) []*a2a.Message {
	if n == nil || *n >= len(h) {
		return h
	}
	if *n <= 0 {
		return nil
	}
	return h[len(h)-*n:]
}

// messageText joins a message's text parts; ok is false when it holds any other part.
func messageText(m *a2a.Message) (text string, ok bool) {
	var b strings.Builder
	for _, p := range m.Parts {
		tp, isText := p.(a2a.TextPart)
		if !isText {
			return "", false
		}
		b.WriteString(tp.Text)
	}
	return b.String(), true
}

// acceptsText reports whether accepted output modes allow the text this agent answers with.
func acceptsText(modes []string) bool {
	if len(modes) == 0 {
		return true
	}
	for _, m := range modes {
		switch strings.ToLower(strings.TrimSpace(m)) {
		case "text", "text/plain", "text/*", "*/*", "*":
			return true
		}
	}
	return false
}
