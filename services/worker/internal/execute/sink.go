package execute

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"

	"github.com/turnstile-run/turnstile/pkg/streams"
	"github.com/turnstile-run/turnstile/pkg/telemetry"
	"github.com/turnstile-run/turnstile/pkg/turnstore"
	"github.com/turnstile-run/turnstile/pkg/wire"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent"
)

// heldLinger is how long turn.started (and turn.retrying) wait for the agent's first events before
// they are published on their own. The agent's deltas in that time are held with them: an agent
// that answers within it — a cached or short reply — has its events published in one call of the
// publish script, at once when it returns, beside the completion's commit (turn.completed follows
// once both are done), or with turn.completed while the publisher is busy (see release). An agent
// whose first token takes longer ends the wait itself: an adapter about to call its upstream
// flushes the sink (agent.Flusher), so turn.started goes out while the request is under way, and
// for any other slow agent turn.started is late by this much and no more; its deltas are then
// published as they come. Tool calls and tool results are never held: they go out, with whatever
// is held, before the agent's call returns, so a retried attempt's prior events (and any reader of
// the stream) know of every tool call the agent made.
const heldLinger = 5 * time.Millisecond

// terminalPatience is how long the publish of an attempt's terminal event (with whatever is still
// held) keeps trying while Redis is unreachable. The turn's row is terminal by then, so the publish
// is all that is left to do, and nothing else would deliver these events (a redelivered record
// republishes the terminal event alone, and only after a crash): a short Redis outage is worth
// holding the turn's slot through rather than leave the stream without them. A drain ends the wait
// early (the turn's context ends), and a stale token ends it at once.
const terminalPatience = 30 * time.Second

// maxHeld bounds the events held at once: an agent that emits more within heldLinger has them
// published at once, as a group, and the rest of its events as they come.
const maxHeld = 32

// attemptSink publishes one attempt's events with its fencing token. It implements agent.Sink.
// turn.attempt makes it, with the attempt it belongs to.
type attemptSink struct {
	pub     Publisher
	retried func(terminal bool) // Hooks.PublishRetried, or nil
	session wire.SessionKey
	turnID  string
	// row is the turn's ID in Postgres, which turnID (as its client knows it) may not be.
	row     uuid.UUID
	attempt int
	token   wire.FenceToken
	// traceparent is the record's trace context, for events published where the turn's context
	// has none.
	traceparent string
	deltas      int
	steps       int
	// log, waits and cancel serve Waiting (waiting.go): the executor's logger and set of waiting
	// attempts, and the cancel of the attempt's context. Waiting only publishes when waits is nil.
	log    *slog.Logger
	waits  *waitSet
	cancel context.CancelCauseFunc

	// The events held back by hold (and the agent's deltas while lingering), and the linger timer
	// that publishes them when the agent is slower than heldLinger (its callback closes lingerDone
	// when it has run). lingering is true from hold until the timer fires or is stopped: while it
	// is, the agent's deltas join the held events. heldFailed is the error of a publish of held
	// events that failed, however it was sent (see heldFailure).
	mu         sync.Mutex
	lingerFor  time.Duration // heldLinger when zero
	held       []wire.Event
	lingering  bool
	linger     *time.Timer
	lingerDone chan struct{}
	heldFailed error
	// idle is the publisher's Idle (Idler), or nil: release publishes at once only while it is true.
	idle func() bool
	// released is set when the agent has returned (release); unsent is then what a failed publish
	// of held events could not deliver and may still send, for publishTerminal to send first.
	released bool
	unsent   []wire.Event
	// upstream is the endpoint of the agent's last upstream request (Endpoint); emitted and waited
	// count the events the attempt was given and its announced waits. The statement that ends the
	// attempt records them (end).
	upstream string
	emitted  atomic.Int32
	waited   atomic.Int32
}

var (
	_ agent.Sink          = (*attemptSink)(nil)
	_ agent.CustomSink    = (*attemptSink)(nil)
	_ agent.Flusher       = (*attemptSink)(nil)
	_ agent.EndpointNoter = (*attemptSink)(nil)
)

// Endpoint implements agent.EndpointNoter: the attempt's row names the last endpoint it called.
func (s *attemptSink) Endpoint(address string) {
	s.mu.Lock()
	s.upstream = address
	s.mu.Unlock()
}

// end is what the statement ending the attempt records of it: its upstream, its events (with the
// terminal event the attempt publishes next when terminal is set) and its waits.
func (s *attemptSink) end(terminal bool) turnstore.AttemptEnd {
	s.mu.Lock()
	up := s.upstream
	s.mu.Unlock()
	n := int(s.emitted.Load())
	if terminal {
		n++
	}
	return turnstore.AttemptEnd{Upstream: up, Events: n, Waits: int(s.waited.Load())}
}

func (s *attemptSink) base() wire.EventBase {
	return wire.EventBase{TurnID: s.turnID, Attempt: s.attempt}
}

// hold keeps ev back to be published in front of the attempt's next event, or on its own once
// heldLinger has passed (see heldLinger). ctx is the one the lingering publish runs with: the turn's,
// not the attempt's, so that a cancel request or a lost lease that ends the attempt does not also
// abort the publish of its turn.started.
func (s *attemptSink) hold(ctx context.Context, ev wire.Event) {
	s.emitted.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held = append(s.held, ev)
	if s.linger != nil {
		return
	}
	d := s.lingerFor
	if d == 0 {
		d = heldLinger
	}
	done := make(chan struct{})
	s.lingering = true
	s.linger, s.lingerDone = time.AfterFunc(d, func() {
		defer close(done)
		s.mu.Lock()
		evs := s.held
		s.held, s.lingering = nil, false
		s.mu.Unlock()
		if len(evs) > 0 {
			_ = s.send(ctx, evs, len(evs)) // a failure is recorded in heldFailed
		}
	}), done
}

// settle stops the linger timer (waiting for its publish if it has begun) and returns the events
// still held.
func (s *attemptSink) settle() []wire.Event {
	s.stopLinger()
	s.mu.Lock()
	defer s.mu.Unlock()
	evs := s.held
	s.held = nil
	return evs
}

// stopLinger stops the linger timer, waiting for its publish if it has begun; what is still held
// stays held.
func (s *attemptSink) stopLinger() {
	s.mu.Lock()
	t, done := s.linger, s.lingerDone
	s.linger, s.lingering = nil, false
	s.mu.Unlock()
	if t != nil && !t.Stop() {
		<-done
	}
}

// endLinger makes the linger run out now, if it is still running: its publish of the held events
// starts at once, in the timer's goroutine, and stopLinger still waits for it. s.mu must be held.
func (s *attemptSink) endLinger() {
	if s.lingering && s.linger.Stop() {
		s.linger.Reset(0)
	}
}

// Flush implements agent.Flusher: the held events go out now instead of when heldLinger runs out.
// It starts their publish and returns; the agent's later events still follow them, and a refusal
// of them refuses the agent's later events, as for the linger's own publish.
func (s *attemptSink) Flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endLinger()
}

// release is called when the agent has returned: the events still held (turn.started and the
// deltas of an agent that finished within heldLinger) go out now, beside the completion's commit,
// so the first delta never waits for that commit. publishTerminal waits for their publish before
// it sends the terminal event, and sends in front of it whatever of them Redis did not take and
// may still take. When the publisher is busy (its Idle is false: every flusher has a batch in
// flight or groups are queued), they stay held instead, to go out in one group with the terminal
// event: a second group for every quick turn costs Redis a script call a turn when it has no time
// to spare, and a busy publisher would delay the group anyway. It fails as flushHeld would if a
// publish of held events had already failed.
func (s *attemptSink) release() error {
	if s.idle != nil && !s.idle() {
		return s.keepHeld()
	}
	s.mu.Lock()
	s.released = true
	s.endLinger()
	s.mu.Unlock()
	return s.heldFailure()
}

// keepHeld is release for a busy publisher: the events still held stay held, to go out in one
// group with the attempt's terminal event, or with whatever the attempt publishes next (flushHeld
// on a retry or hand-off). It stops the linger timer, waiting for its publish if it has begun, and
// fails as flushHeld would if a publish of held events failed.
func (s *attemptSink) keepHeld() error {
	s.stopLinger()
	return s.heldFailure()
}

// flushHeld publishes the events still held and waits for them; it fails if they, or the lingering
// publish of them, failed.
func (s *attemptSink) flushHeld(ctx context.Context) error {
	held := s.settle()
	if err := s.heldFailure(); err != nil || len(held) == 0 {
		return err
	}
	return s.send(ctx, held, len(held))
}

// discard drops whatever is still held and stops the linger timer. The attempt calls it as it ends,
// so the timer's goroutine never outlives the attempt.
func (s *attemptSink) discard() { s.settle() }

// heldFailure is the error of the publish of held events (turn.started, turn.retrying), alone or
// in front of an agent's event, if it failed: the attempt then ends as it would have had
// turn.started been refused before the agent ran.
func (s *attemptSink) heldFailure() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.heldFailed
}

// agentPublish is publish for the agent's events, refused once held events failed to go out. The
// failure is read after settle, which waits for a lingering publish of held events: read before,
// it could miss the failure of a publish still under way and send the agent's event after a
// turn.started that never went out.
func (s *attemptSink) agentPublish(ctx context.Context, ev wire.Event) error {
	s.emitted.Add(1)
	held := s.settle()
	if err := s.heldFailure(); err != nil {
		return err
	}
	return s.send(ctx, append(held, ev), len(held))
}

// agentDelta is agentPublish for a delta, which joins the held events while the linger lasts (see
// heldLinger) instead of being published at once.
func (s *attemptSink) agentDelta(ctx context.Context, ev wire.Event) error {
	s.mu.Lock()
	if s.heldFailed != nil {
		defer s.mu.Unlock()
		return s.heldFailed
	}
	if s.lingering && len(s.held) < maxHeld {
		s.emitted.Add(1)
		s.held = append(s.held, ev)
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	return s.agentPublish(ctx, ev)
}

// publishTerminal appends the attempt's terminal event behind any held events, in one group, once
// the turn's row is terminal: it keeps trying for terminalPatience while Redis is unreachable. A
// stale token is final. It waits for a publish of held events under way (release), and sends
// first what of them that publish could not deliver.
func (s *attemptSink) publishTerminal(ctx context.Context, ev wire.Event) error {
	held := s.settle()
	s.mu.Lock()
	held = append(s.unsent, held...)
	s.unsent = nil
	s.mu.Unlock()
	return s.sendUntil(ctx, append(held, ev), len(held), time.Now().Add(terminalPatience))
}

// send publishes evs in order as one group (the publisher keeps a group's events in order in one
// script call), retrying briefly when Redis is unreachable; the first held of evs are events that
// were held back (hold). A stale token is final, and so is an error followed by a published event:
// sending the failed one again would put it after a later one.
func (s *attemptSink) send(ctx context.Context, evs []wire.Event, held int) error {
	return s.sendUntil(ctx, evs, held, time.Time{})
}

// sendUntil is send, trying again while Redis is unreachable until until has passed, instead of
// five times in all, when until is not zero. Pauses double from 50 ms up to a second.
func (s *attemptSink) sendUntil(ctx context.Context, evs []wire.Event, held int, until time.Time) (err error) {
	// A span per event of a sampled turn, as if each were published alone: the gateway's delivery
	// spans become children of the span of the event they deliver. An unsampled turn gets none
	// (telemetry.StartChild), so its events carry the turn's own trace context, rendered once:
	// spans (and their names) that no exporter would see are neither made nor named.
	ms := make([]streams.Message, len(evs))
	var spans []trace.Span
	tp := ""
	if telemetry.Unsampled(ctx) {
		tp = telemetry.Traceparent(ctx)
		for i, ev := range evs {
			ms[i] = s.message(ev, tp)
		}
	} else {
		spans = make([]trace.Span, len(evs))
		for i, ev := range evs {
			ectx, span := telemetry.StartChild(ctx, "worker.publish "+string(ev.Type))
			spans[i] = span
			if i == 0 || span.IsRecording() {
				tp = telemetry.Traceparent(ectx)
			}
			if tp == "" {
				tp = s.traceparent
			}
			ms[i] = s.message(ev, tp)
		}
	}
	published := 0
	defer func() {
		for i, span := range spans {
			if i < published {
				span.End()
				continue
			}
			telemetry.End(span, err)
		}
	}()
	delay := 50 * time.Millisecond
	for i := 0; ; i++ {
		done, again, perr := groupOutcome(s.publish(ctx, ms[published:]))
		published += done
		if perr == nil {
			return nil
		}
		gaveUp := i == 4
		if !until.IsZero() {
			gaveUp = !time.Now().Before(until)
		}
		if !again || gaveUp || ctx.Err() != nil {
			if published < held {
				s.mu.Lock()
				s.heldFailed = perr
				if again && s.released && held == len(evs) {
					// The held events of an agent that has returned, published on their own:
					// nothing was sent after them, so the terminal group may carry them.
					s.unsent = evs[published:]
				}
				s.mu.Unlock()
			}
			return perr
		}
		if s.retried != nil {
			s.retried(!until.IsZero())
		}
		select {
		case <-ctx.Done():
			return perr
		case <-time.After(delay):
		}
		delay = min(2*delay, time.Second)
	}
}

// message is ev as the publisher takes it.
func (s *attemptSink) message(ev wire.Event, tp string) streams.Message {
	return streams.Message{
		Session: s.session, TurnID: s.turnID, TurnRow: s.row, Token: s.token, Event: ev, Traceparent: tp,
	}
}

// publish sends a group through the publisher; an error of the call is every event's.
func (s *attemptSink) publish(ctx context.Context, ms []streams.Message) []streams.PublishResult {
	res, err := s.pub.Do(ctx, ms)
	if err != nil {
		res = make([]streams.PublishResult, len(ms))
		for i := range res {
			res[i].Err = err
		}
	}
	return res
}

// groupOutcome reads a group's results: how many leading events were published, whether the rest
// may be sent again, and the first error.
func groupOutcome(res []streams.PublishResult) (done int, again bool, err error) {
	for i, r := range res {
		if r.Err == nil {
			continue
		}
		if errors.Is(r.Err, streams.ErrStaleToken) {
			return i, false, r.Err
		}
		for _, later := range res[i+1:] {
			if later.Err == nil {
				return i, false, r.Err
			}
		}
		return i, true, r.Err
	}
	return len(res), false, nil
}

func (s *attemptSink) Delta(ctx context.Context, text string) error {
	ev := wire.NewEvent(wire.EventDelta, wire.DeltaData{EventBase: s.base(), Index: s.deltas, Text: text})
	if err := s.agentDelta(ctx, ev); err != nil {
		return err
	}
	s.deltas++
	return nil
}

func (s *attemptSink) ToolCall(ctx context.Context, call agent.ToolCall) error {
	s.steps++
	key := call.IdempotencyKey
	if key == "" {
		key = s.turnID + ":" + strconv.Itoa(s.steps)
	}
	return s.agentPublish(ctx, wire.NewEvent(wire.EventToolCall, wire.ToolCallData{
		EventBase: s.base(), CallID: call.CallID, Name: call.Name, Arguments: call.Arguments, IdempotencyKey: key,
	}))
}

// Custom publishes an event of the agent's own (agent.CustomSink).
func (s *attemptSink) Custom(ctx context.Context, name string, data json.RawMessage) error {
	if len(data) == 0 {
		data = json.RawMessage("null")
	}
	return s.agentPublish(ctx, wire.NewEvent(wire.EventCustom, wire.CustomData{EventBase: s.base(), Name: name, Data: data}))
}

func (s *attemptSink) ToolResult(ctx context.Context, res agent.ToolResult) error {
	return s.agentPublish(ctx, wire.NewEvent(wire.EventToolResult, wire.ToolResultData{
		EventBase: s.base(), CallID: res.CallID, Result: res.Result, Error: res.Error,
	}))
}
