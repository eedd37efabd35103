package wire

import (
	"encoding/json"
	"time"

	fastjson "github.com/segmentio/encoding/json"
)

// EventType names an event on a session stream; it is the SSE "event:" field.
type EventType string

// The event vocabulary of a session stream.
const (
	EventStarted    EventType = "turn.started"
	EventDelta      EventType = "turn.delta"
	EventToolCall   EventType = "turn.tool_call"
	EventToolResult EventType = "turn.tool_result"
	EventCompleted  EventType = "turn.completed"
	EventFailed     EventType = "turn.failed"
	EventCancelled  EventType = "turn.cancelled"
	EventExpired    EventType = "turn.expired"
	EventRetrying   EventType = "turn.retrying"
	// EventWaiting says a running turn waits on its upstream (see WaitingData); it is not terminal,
	// and the turn goes on (or ends) with its usual events.
	EventWaiting EventType = "turn.waiting"
	// EventCustom is an event of the agent's own (see CustomData): a progress note, a UI hint. It
	// is not terminal and no part of the turn's output; front doors relay it where their protocol
	// has a place for it (LangGraph's custom stream mode).
	EventCustom EventType = "turn.custom"
	// EventStreamReset is sent by the gateway, never stored: the client's cursor points at history
	// that no longer exists, so it must re-read state through the API.
	EventStreamReset EventType = "stream.reset"
	// EventStreamRevoked is sent by the gateway, never stored, as the last event of a stream whose
	// token's API key was revoked; the client's reconnect is refused with 401.
	EventStreamRevoked EventType = "stream.revoked"
)

// Terminal reports whether an event ends its turn. A stream holds at most one terminal event per turn.
func (t EventType) Terminal() bool {
	switch t {
	case EventCompleted, EventFailed, EventCancelled, EventExpired:
		return true
	}
	return false
}

// Event is one entry of a session stream as the worker publishes it. Data is the JSON body of the
// SSE "data:" field and always carries turn_id and attempt.
type Event struct {
	Type EventType
	Data json.RawMessage
}

// EventBase is embedded by every event payload.
type EventBase struct {
	TurnID  string `json:"turn_id"`
	Attempt int    `json:"attempt"`
}

// DeltaData is the payload of turn.delta; Index counts the deltas of one attempt from zero.
type DeltaData struct {
	EventBase
	Index int    `json:"index"`
	Text  string `json:"text"`
}

// CompletedData is the payload of turn.completed.
type CompletedData struct {
	EventBase
	Output Output `json:"output"`
}

// ErrorData is the payload of turn.failed, turn.cancelled and turn.expired.
type ErrorData struct {
	EventBase
	Error string `json:"error,omitempty"`
}

// RetryingData is the payload of turn.retrying: a new attempt took over after the previous one's
// lease expired or was released.
type RetryingData struct {
	EventBase
	PreviousAttempt int `json:"previous_attempt"`
}

// Reasons a turn waits on its upstream (WaitingData.Reason).
const (
	// WaitRateLimited: the upstream answered 429 (or reported a rate limit in its stream).
	WaitRateLimited = "rate_limited"
	// WaitOverloaded: the upstream answered 503 (or reported that it is overloaded).
	WaitOverloaded = "overloaded"
	// WaitRetryPause: the upstream failed transiently and the call is retried after a pause.
	WaitRetryPause = "retry_pause"
	// WaitConcurrencyLimit: the worker's adaptive limit for the upstream is full; the call starts
	// when a slot frees.
	WaitConcurrencyLimit = "concurrency_limit"
	// WaitTenantLimit: the turn could start, but its tenant (or tenant×agent) runs as many turns
	// as its concurrency quota allows (/v1/admin/quotas); it starts when one of them ends or the
	// quota is raised. Announced before the turn's first attempt, so its attempt is 0.
	WaitTenantLimit = "tenant_limit"
	// WaitUpstreamUnavailable: the upstream could not be reached (a refused or failed connection,
	// a name that did not resolve, a 502 or 504 from a proxy in front of it) before it streamed
	// anything; the call is tried again with a growing pause until the turn's deadline leaves
	// only the minimum useful time. Announced as the wait begins and again at the 2nd, 4th,
	// 8th … failed try (WaitingData.Tries), not at every try.
	WaitUpstreamUnavailable = "upstream_unavailable"
)

// WaitingData is the payload of turn.waiting: the turn waits on its upstream for Reason (one of the
// Wait* constants) and tries again at RetryAt, absent when the wait has no known end (a full
// concurrency limit). Error is the upstream's last answer, absent when the wait follows none.
// Tries, for WaitUpstreamUnavailable, counts the requests that found the upstream unavailable so
// far.
type WaitingData struct {
	EventBase
	Reason  string    `json:"reason"`
	RetryAt time.Time `json:"retry_at,omitzero"`
	Error   string    `json:"error,omitempty"`
	Tries   int       `json:"tries,omitempty"`
}

// ToolCallData is the payload of turn.tool_call.
type ToolCallData struct {
	EventBase
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// IdempotencyKey is stable across attempts (turn ID and step), so a tool can deduplicate a call
	// that a taken-over attempt repeats.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// CustomData is the payload of turn.custom: a name the agent chose and its JSON value.
type CustomData struct {
	EventBase
	Name string          `json:"name,omitempty"`
	Data json.RawMessage `json:"data"`
}

// ToolResultData is the payload of turn.tool_result.
type ToolResultData struct {
	EventBase
	CallID string          `json:"call_id"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// StartedData is the payload of turn.started.
type StartedData struct {
	EventBase
	SessionID string `json:"session_id"`
}

// NewEvent marshals a payload into an event. Payloads are plain structs, so marshalling cannot fail
// short of a programming error, which panics.
//
// The payloads of every turn's lifecycle and text (strings and numbers only) go through
// segmentio/encoding, whose output for them is encoding/json's (FuzzNewEvent) in less time, since
// every turn makes several of them. The others hold raw JSON (tool arguments and results), which
// encoding/json validates and compacts, and stay with it.
func NewEvent(t EventType, payload any) Event {
	var b []byte
	var err error
	switch payload.(type) {
	case StartedData, DeltaData, CompletedData, ErrorData, RetryingData:
		b, err = fastjson.Marshal(payload)
	default:
		b, err = json.Marshal(payload)
	}
	if err != nil {
		panic("wire: marshal event payload: " + err.Error())
	}
	return Event{Type: t, Data: b}
}
