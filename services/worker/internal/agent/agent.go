package agent

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Turn is what an agent is asked to answer.
type Turn struct {
	TurnID    string
	SessionID string
	Tenant    string
	// Attempt counts from 1; a value above 1 means an earlier attempt was taken over.
	Attempt  int
	Text     string
	Metadata map[string]any
	Deadline time.Time
	// Prior is what earlier attempts of this turn already published (deltas, tool calls and results),
	// oldest first, so a new attempt can avoid repeating side effects.
	Prior []PriorEvent
}

// PriorEvent is an event an earlier attempt of the turn published.
type PriorEvent struct {
	Type    string
	Attempt int
	Data    json.RawMessage
}

// Message is one entry of the session history, oldest first.
type Message struct {
	Seq    int64
	TurnID string
	// Role is "user" or "assistant".
	Role    string
	Content string
}

// TurnMessages are the two messages a succeeded turn adds to its session history: its question
// (role user) at seq - 1 and its answer (role assistant) at seq, the number the history stores it
// under (one session_history row).
func TurnMessages(seq int64, turnID, question, answer string) [2]Message {
	return [2]Message{
		{Seq: seq - 1, TurnID: turnID, Role: "user", Content: question},
		{Seq: seq, TurnID: turnID, Role: "assistant", Content: answer},
	}
}

// ToolCall is a tool invocation an agent announces.
type ToolCall struct {
	CallID    string
	Name      string
	Arguments json.RawMessage
	// IdempotencyKey is turn ID and step, stable across attempts; the sink fills it when empty.
	IdempotencyKey string
}

// ToolResult is the outcome of a tool call.
type ToolResult struct {
	CallID string
	Result json.RawMessage
	Error  string
}

// Sink receives an agent's events in order. ToolCall and ToolResult publish to the session stream
// before they return. So does Delta, except in an attempt's first few milliseconds (the worker's
// heldLinger, 5 ms), when a delta may be held to go out in one publish with turn.started — at the
// latest as the agent returns; a held delta is published, in order, before any later event, and
// never if the attempt is fenced. An error
// means the attempt must stop (its lease is lost or its context ended), and the agent should return
// it.
type Sink interface {
	Delta(ctx context.Context, text string) error
	ToolCall(ctx context.Context, call ToolCall) error
	ToolResult(ctx context.Context, result ToolResult) error
}

// CustomSink is an optional interface of a Sink, found by type assertion (EmitCustom): it
// publishes an event of the agent's own, turn.custom, in order with the attempt's other events.
type CustomSink interface {
	Custom(ctx context.Context, name string, data json.RawMessage) error
}

// EmitCustom publishes a custom event through sink when it takes them; a sink that does not
// (a test's) drops it.
func EmitCustom(ctx context.Context, sink Sink, name string, data json.RawMessage) error {
	if cs, ok := sink.(CustomSink); ok {
		return cs.Custom(ctx, name, data)
	}
	return nil
}

// Flusher is an optional interface of a Sink, found by type assertion. A Sink may hold an attempt's
// first events back for a few milliseconds so that an agent that answers at once has them
// published in one round trip; an agent about to wait on something slower (a request to its
// upstream) calls Flush so that what is held — turn.started above all — goes out now, while it
// waits, instead of when the hold runs out. Flush starts the publish and returns at once: events
// emitted after it still follow what was held. Implementations must be safe for concurrent use and
// fast.
type Flusher interface {
	Flush()
}

// EndpointNoter is an optional interface of a Sink, found by type assertion: an agent's upstream
// guard tells it the endpoint of each request it sends, so the attempt's record names the upstream
// that served it. Implementations must be safe for concurrent use and fast.
type EndpointNoter interface {
	Endpoint(address string)
}

// Wait is a wait of a turn on its upstream, as a Waiter learns of it.
type Wait struct {
	// Reason is one of wire's Wait* reasons (rate_limited, overloaded, retry_pause,
	// concurrency_limit, upstream_unavailable).
	Reason string
	// RetryAt is when the call is tried again; zero when the wait has no known end (a full
	// concurrency limit waits for a slot).
	RetryAt time.Time
	// Err is the upstream's last answer, nil when the wait follows none.
	Err error
	// Tries counts the requests that found the upstream unavailable so far (upstream_unavailable
	// only).
	Tries int
	// Repeat says the wait goes on from one announced before with the same reason (an unreachable
	// upstream tried again): the worker marks the turn as waiting and logs it at debug level, but
	// publishes no turn.waiting for it.
	Repeat bool
}

// Waiter is an optional interface of a Sink, found by type assertion: an agent (its upstream guard)
// announces every wait on its upstream through it, so the turn's stream and log say why nothing
// happens and when the next try is due.
//
// Waiting is called as the wait begins; resume is called as it ends, before the call is tried
// again. While a turn only waits it holds no upstream request and has emitted nothing new, so the
// worker may end its context then (a drain hands it off at once instead of letting it sit out the
// grace period); the agent returns the error as it would for any ended context. An error from
// Waiting means the attempt must stop, as for the Sink's other methods. Implementations must be
// safe for concurrent use and fast.
type Waiter interface {
	Waiting(ctx context.Context, w Wait) (resume func(), err error)
}

// Result is an agent's final output.
type Result struct {
	Text string
	// State is empty when the answer ends the exchange, or wire.OutputInputRequired or
	// wire.OutputAuthRequired when the agent ended its turn waiting for the user (the turn
	// succeeds; the session's next turn carries the user's answer).
	State string
	// Usage is the model's token accounting, when the upstream reports it.
	Usage *Usage
}

// Usage counts the tokens an upstream model spent on a turn; the worker records it with the
// turn's output (wire.Output.Usage).
type Usage struct {
	PromptTokens     int64
	CompletionTokens int64
	// TotalTokens is what the upstream counted in all, PromptTokens + CompletionTokens when it
	// does not say.
	TotalTokens int64
	// Model names the model that spent them, when the upstream says.
	Model string
}

// Tool runs one tool an agent's model asks for. key is the call's idempotency key (turn ID and step,
// stable across attempts), which a tool with side effects should pass on so a takeover does not
// repeat them. Implementations must be safe for concurrent use.
type Tool func(ctx context.Context, key string, arguments json.RawMessage) (json.RawMessage, error)

// Agent answers turns. Implementations must be safe for concurrent use by many turns. history is
// shared with the worker's cache and must not be modified.
type Agent interface {
	Run(ctx context.Context, turn Turn, history []Message, sink Sink) (Result, error)
}

// Func adapts a function to Agent.
type Func func(ctx context.Context, turn Turn, history []Message, sink Sink) (Result, error)

// Run calls f.
func (f Func) Run(ctx context.Context, turn Turn, history []Message, sink Sink) (Result, error) {
	return f(ctx, turn, history, sink)
}

// ErrUnavailable marks an upstream that could not be reached for as long as the turn's deadline
// let the agent wait for it: the worker fails the turn with the error, which names the wait, without
// another attempt or a dead letter (the record is not poison, and a replay after its deadline could
// not help). An error that matches it matches ErrPermanent too.
var ErrUnavailable = errors.New("upstream unavailable")

// ErrPermanent marks an error no retry can fix (a malformed request, a refused input): the worker
// fails the turn at once instead of spending more attempts.
var ErrPermanent = errors.New("permanent agent error")
