package execute

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/turnstile-run/turnstile/pkg/streams"
	"github.com/turnstile-run/turnstile/pkg/telemetry"
	"github.com/turnstile-run/turnstile/pkg/wire"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent"
)

// attemptSink publishes one attempt's events with its fencing token. It implements agent.Sink.
type attemptSink struct {
	pub         func(ctx context.Context, m streams.Message) (streams.Published, error)
	sessionID   string
	turnID      string
	attempt     int
	token       int64
	traceparent string
	// rec is the attempt's record, for its dead letter.
	rec    *kgo.Record
	deltas int
	steps  int
}

var _ agent.Sink = (*attemptSink)(nil)

func (s *attemptSink) base() wire.EventBase {
	return wire.EventBase{TurnID: s.turnID, Attempt: s.attempt}
}

// publish appends ev, retrying briefly when Redis is unreachable. A stale token is final.
func (s *attemptSink) publish(ctx context.Context, ev wire.Event) error {
	ctx, span := telemetry.Start(ctx, "worker.publish "+string(ev.Type))
	defer span.End()
	tp := telemetry.Traceparent(ctx) // the gateway's delivery spans become children of this one
	if tp == "" {
		tp = s.traceparent
	}
	delay := 50 * time.Millisecond
	for i := 0; ; i++ {
		_, err := s.pub(ctx, streams.Message{SessionID: s.sessionID, TurnID: s.turnID, Token: s.token, Event: ev, Traceparent: tp})
		if err == nil || errors.Is(err, streams.ErrStaleToken) || i == 4 || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(delay):
		}
		delay *= 2
	}
}

func (s *attemptSink) Delta(ctx context.Context, text string) error {
	ev := wire.NewEvent(wire.EventDelta, wire.DeltaData{EventBase: s.base(), Index: s.deltas, Text: text})
	if err := s.publish(ctx, ev); err != nil {
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
	return s.publish(ctx, wire.NewEvent(wire.EventToolCall, wire.ToolCallData{
		EventBase: s.base(), CallID: call.CallID, Name: call.Name, Arguments: call.Arguments, IdempotencyKey: key,
	}))
}

func (s *attemptSink) ToolResult(ctx context.Context, res agent.ToolResult) error {
	return s.publish(ctx, wire.NewEvent(wire.EventToolResult, wire.ToolResultData{
		EventBase: s.base(), CallID: res.CallID, Result: res.Result, Error: res.Error,
	}))
}

// panicError carries a recovered agent panic.
type panicError struct{ v any }

func (p panicError) Error() string { return fmt.Sprintf("agent panicked: %v", p.v) }
