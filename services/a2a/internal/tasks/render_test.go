package tasks

import (
	"encoding/json"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/a2atask"
	"github.com/turnstile-run/turnstile/pkg/frontdoor"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

func native(id string, typ wire.EventType, payload any) frontdoor.Event {
	ev := wire.NewEvent(typ, payload)
	return frontdoor.Event{ID: id, Type: typ, Data: ev.Data}
}

// TestRenderTurn renders one turn's native events, a takeover included, and checks the A2A
// events, their ids and what the renderer keeps of the task.
func TestRenderTurn(t *testing.T) {
	t.Parallel()
	r := newRenderer("task-1", "ctx-1", "task-1")
	b1 := wire.EventBase{TurnID: "task-1", Attempt: 1}
	b2 := wire.EventBase{TurnID: "task-1", Attempt: 2}
	var all []tagged
	for _, ev := range []frontdoor.Event{
		native("e:1-0", wire.EventStarted, wire.StartedData{EventBase: b1, SessionID: "ctx-1"}),
		native("e:2-0", wire.EventDelta, wire.DeltaData{EventBase: b1, Index: 0, Text: "dead "}),
		native("e:3-0", wire.EventRetrying, wire.RetryingData{EventBase: b2, PreviousAttempt: 1}),
		native("e:4-0", wire.EventDelta, wire.DeltaData{EventBase: b2, Index: 0, Text: "hello "}),
		native("e:5-0", wire.EventDelta, wire.DeltaData{EventBase: b2, Index: 1, Text: "world"}),
		native("e:6-0", wire.EventCompleted, wire.CompletedData{EventBase: b2, Output: wire.Output{Text: "hello world", State: wire.OutputInputRequired}}),
	} {
		evs, done, err := r.render(ev)
		require.NoError(t, err)
		require.Equal(t, ev.Type == wire.EventCompleted, done)
		all = append(all, evs...)
	}
	var ids []string
	for _, tg := range all {
		ids = append(ids, tg.id)
	}
	require.Equal(t, []string{"e:1-0", "e:2-0", "e:3-0", "e:4-0", "e:5-0", "e:6-0~0", "e:6-0"}, ids)
	require.False(t, all[3].ev.(*a2a.TaskArtifactUpdateEvent).Append, "the retried attempt's first delta restarts the artifact")
	require.True(t, all[4].ev.(*a2a.TaskArtifactUpdateEvent).Append)
	chunk := all[5].ev.(*a2a.TaskArtifactUpdateEvent)
	require.True(t, chunk.LastChunk)
	require.False(t, chunk.Append, "the last chunk carries the whole output")
	final := all[6].ev.(*a2a.TaskStatusUpdateEvent)
	require.True(t, final.Final)
	require.Equal(t, a2a.TaskStateInputRequired, final.Status.State)
	require.Equal(t, "e:6-0", final.Metadata[EventIDKey])
	require.Equal(t, "hello world", r.text.String())
	require.Equal(t, a2a.TaskStateInputRequired, r.state)

	_, done, err := r.render(frontdoor.Event{ID: "e:7-0", Type: wire.EventStreamReset, Data: json.RawMessage(`{}`)})
	require.ErrorIs(t, err, a2a.ErrServerError)
	require.True(t, done)
}

func TestParseCursor(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]cursor{
		"": {k: -1}, "0": {k: -1}, "ep:1-0": {native: "ep:1-0", k: -1}, "ep:1-0~0": {native: "ep:1-0", k: 0},
	} {
		got, err := parseCursor(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, bad := range []string{"ep:1-0~x", "~1", "ep:1-0~-2"} {
		_, err := parseCursor(bad)
		require.Error(t, err, bad)
	}
}

func TestStateOf(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		status wire.Status
		out    string
		want   a2a.TaskState
	}{
		{wire.StatusQueued, "", a2a.TaskStateSubmitted},
		{wire.StatusRunning, "", a2a.TaskStateWorking},
		{wire.StatusSucceeded, "", a2a.TaskStateCompleted},
		{wire.StatusSucceeded, wire.OutputInputRequired, a2a.TaskStateInputRequired},
		{wire.StatusSucceeded, wire.OutputAuthRequired, a2a.TaskStateAuthRequired},
		{wire.StatusFailed, "", a2a.TaskStateFailed},
		{wire.StatusExpired, "", a2a.TaskStateFailed},
		{wire.StatusCancelled, "", a2a.TaskStateCanceled},
	} {
		require.Equal(t, c.want, a2atask.State(c.status, c.out), "%s %s", c.status, c.out)
	}
}

func TestContextForIsStable(t *testing.T) {
	t.Parallel()
	for _, code := range []string{"", "euw1"} {
		require.Equal(t, contextFor(code, "m-1"), contextFor(code, "m-1"), "a retried first message lands in the same session")
		require.NotEqual(t, contextFor(code, "m-1"), contextFor(code, "m-2"))
		require.True(t, wire.SessionIDValid(contextFor(code, "m-1")))
	}
	require.Equal(t, "euw1-"+contextFor("", "m-1"), contextFor("euw1", "m-1"), "a region prefixes the derived context")
	_, err := uuid.Parse(contextFor("", "m-1"))
	require.NoError(t, err, "bare in single-region mode")
}

func TestOutcome(t *testing.T) {
	t.Parallel()
	require.Equal(t, "ok", Outcome(nil))
	require.Equal(t, "task_not_found", Outcome(a2a.ErrTaskNotFound))
	require.Equal(t, "unavailable", Outcome(errUnavailable))
	require.Equal(t, "version_not_supported", Outcome(ErrVersionNotSupported))
}
