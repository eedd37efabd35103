package execute

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/turnstile-run/turnstile/pkg/streams"
	"github.com/turnstile-run/turnstile/pkg/telemetry"
	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/pkg/wire"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent"
)

// recordedPublisher is the real publisher (real Redis) with a record of the groups it was given, so
// a test can tell which events shared a script call.
type recordedPublisher struct {
	pub    *streams.Publisher
	reader *streams.Reader
	mu     sync.Mutex
	groups [][]wire.EventType
	called chan struct{} // receives after every call
}

func newRecordedPublisher(t *testing.T) *recordedPublisher {
	env := testenv.New(t, testenv.Options{Partitions: 1})
	return &recordedPublisher{
		pub:    streams.NewPublisher(env.Redis, env.Config.KeyPrefix, 1000, time.Hour),
		reader: streams.NewReader(env.Redis, env.Config.KeyPrefix),
		called: make(chan struct{}, 16),
	}
}

func (r *recordedPublisher) publish(ctx context.Context, ms []streams.Message) []streams.PublishResult {
	types := make([]wire.EventType, len(ms))
	for i, m := range ms {
		types[i] = m.Event.Type
	}
	res := r.pub.PublishMany(ctx, ms)
	r.mu.Lock()
	r.groups = append(r.groups, types)
	r.mu.Unlock()
	r.called <- struct{}{}
	return res
}

func (r *recordedPublisher) calls() [][]wire.EventType {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]wire.EventType(nil), r.groups...)
}

// stream returns the types of the session stream's entries, oldest first.
func (r *recordedPublisher) stream(t *testing.T, sessionID string) []wire.EventType {
	_, entries, err := r.reader.Read(context.Background(), wire.NewSessionKey("t", sessionID), streams.EntryID{}, 100)
	require.NoError(t, err)
	out := make([]wire.EventType, len(entries))
	for i, e := range entries {
		out[i] = e.Type
	}
	return out
}

// publishFunc is a publish function as a Publisher.
type publishFunc func(ctx context.Context, ms []streams.Message) []streams.PublishResult

func (f publishFunc) Do(ctx context.Context, ms []streams.Message) ([]streams.PublishResult, error) {
	return f(ctx, ms), nil
}

// sink returns an attempt's sink whose held events linger for linger.
func (r *recordedPublisher) sink(sessionID string, token wire.FenceToken, linger time.Duration) *attemptSink {
	return &attemptSink{pub: publishFunc(r.publish), session: wire.NewSessionKey("t", sessionID), turnID: "turn-" + sessionID, attempt: 1, token: token, lingerFor: linger}
}

// received reports whether ch delivers (or is closed) within signalTimeout.
func received(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	case <-time.After(signalTimeout):
		return false
	}
}

// forever is a linger no test outlasts: the held events go out only with the next event.
const forever = time.Hour

// startedSink returns a recorded publisher and an attempt's sink on it (session sessionID, token
// token, its held events lingering for linger) that holds turn.started; the sink is discarded when
// the test ends.
func startedSink(t *testing.T, sessionID string, token wire.FenceToken, linger time.Duration) (*recordedPublisher, *attemptSink) {
	t.Helper()
	r := newRecordedPublisher(t)
	s := r.sink(sessionID, token, linger)
	t.Cleanup(s.discard)
	s.hold(context.Background(), started(s))
	return r, s
}

func started(s *attemptSink) wire.Event {
	return wire.NewEvent(wire.EventStarted, wire.StartedData{EventBase: s.base(), SessionID: s.session.SessionID()})
}

func TestSinkHeldEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("AQuickAgentsEventsGoOutAsItReturns", func(t *testing.T) {
		r, s := startedSink(t, "quick", 1, forever)
		s.idle = func() bool { return true }
		require.NoError(t, s.Delta(ctx, "hello"))
		require.NoError(t, s.Delta(ctx, "world"))
		require.Empty(t, r.calls(), "the deltas wait with turn.started while the linger lasts")
		require.NoError(t, s.release())
		require.True(t, received(r.called), "published as the agent returned, not with the terminal event")
		held := []wire.EventType{wire.EventStarted, wire.EventDelta, wire.EventDelta}
		require.Equal(t, [][]wire.EventType{held}, r.calls(), "one group, before the completion committed")
		require.NoError(t, s.publishTerminal(ctx, wire.NewEvent(wire.EventCompleted, wire.CompletedData{EventBase: s.base()})))
		require.Equal(t, [][]wire.EventType{held, {wire.EventCompleted}}, r.calls())
		require.Equal(t, append(held, wire.EventCompleted), r.stream(t, "quick"))
	})

	t.Run("ABusyPublisherGetsAQuickAgentsWholeTurnInOneCall", func(t *testing.T) {
		r, s := startedSink(t, "busy", 1, forever)
		s.idle = func() bool { return false }
		require.NoError(t, s.Delta(ctx, "hello"))
		require.NoError(t, s.release())
		require.Nil(t, s.linger, "once the agent finished, no linger publishes the held events on their own")
		require.Empty(t, r.calls(), "the held events wait for the terminal event")
		require.NoError(t, s.publishTerminal(ctx, wire.NewEvent(wire.EventCompleted, wire.CompletedData{EventBase: s.base()})))
		whole := []wire.EventType{wire.EventStarted, wire.EventDelta, wire.EventCompleted}
		require.Equal(t, [][]wire.EventType{whole}, r.calls())
		require.Equal(t, whole, r.stream(t, "busy"))
	})

	t.Run("FlushPublishesHeldEventsWithoutTheLinger", func(t *testing.T) {
		r, s := startedSink(t, "flushed", 1, forever)
		s.Flush()
		require.True(t, received(r.called), "the flush published turn.started")
		require.Equal(t, [][]wire.EventType{{wire.EventStarted}}, r.calls())
		s.Flush() // nothing held: nothing to do
		require.NoError(t, s.Delta(ctx, "late"))
		require.Len(t, r.calls(), 2, "after the flush, deltas are published as they come")
		require.Equal(t, []wire.EventType{wire.EventStarted, wire.EventDelta}, r.stream(t, "flushed"))
	})

	t.Run("TheTerminalEventWaitsForTheHeldGroup", func(t *testing.T) {
		r, s := startedSink(t, "ordered", 1, forever)
		began, let := make(chan struct{}), make(chan struct{})
		var heldDone atomic.Bool
		s.pub = publishFunc(func(ctx context.Context, ms []streams.Message) []streams.PublishResult {
			if ms[0].Event.Type == wire.EventStarted {
				close(began)
				<-let
				defer heldDone.Store(true)
			} else if !heldDone.Load() {
				t.Error("the terminal event was sent before the held group was accepted")
			}
			return r.publish(ctx, ms)
		})
		require.NoError(t, s.Delta(ctx, "hi"))
		require.NoError(t, s.release())
		require.True(t, received(began))
		errc := make(chan error, 1)
		go func() {
			errc <- s.publishTerminal(ctx, wire.NewEvent(wire.EventCompleted, wire.CompletedData{EventBase: s.base()}))
		}()
		close(let)
		require.NoError(t, <-errc)
		require.Equal(t, []wire.EventType{wire.EventStarted, wire.EventDelta, wire.EventCompleted}, r.stream(t, "ordered"))
	})

	t.Run("AToolCallIsPublishedBeforeItReturns", func(t *testing.T) {
		r, s := startedSink(t, "tool", 1, forever)
		require.NoError(t, s.Delta(ctx, "let me look"))
		require.NoError(t, s.ToolCall(ctx, agent.ToolCall{CallID: "c1", Name: "search"}))
		require.Equal(t, [][]wire.EventType{{wire.EventStarted, wire.EventDelta, wire.EventToolCall}}, r.calls(),
			"the tool call takes what was held with it")
		require.NoError(t, s.Delta(ctx, "found it"))
		require.Len(t, r.calls(), 2, "after the held events went out, deltas are published as they come")
		require.Equal(t, []wire.EventType{wire.EventStarted, wire.EventDelta, wire.EventToolCall, wire.EventDelta}, r.stream(t, "tool"))
	})

	t.Run("TheLingerPublishesHeldDeltasOfASlowerAgent", func(t *testing.T) {
		r, s := startedSink(t, "lingered", 1, forever)
		require.NoError(t, s.Delta(ctx, "first"))
		s.linger.Reset(0) // the linger runs out now
		<-r.called
		require.Equal(t, [][]wire.EventType{{wire.EventStarted, wire.EventDelta}}, r.calls())
		require.NoError(t, s.Delta(ctx, "second"))
		require.Len(t, r.calls(), 2, "a delta after the linger is published at once")
		require.Equal(t, []wire.EventType{wire.EventStarted, wire.EventDelta, wire.EventDelta}, r.stream(t, "lingered"))
	})

	t.Run("AtMostMaxHeldEventsWait", func(t *testing.T) {
		r, s := startedSink(t, "chatty", 1, forever)
		for i := range maxHeld {
			require.NoError(t, s.Delta(ctx, "w"))
			if i < maxHeld-1 {
				require.Empty(t, r.calls())
			}
		}
		calls := r.calls()
		require.Len(t, calls, 1, "the delta that found maxHeld events waiting published them")
		require.Len(t, calls[0], maxHeld+1)
		require.NoError(t, s.Delta(ctx, "w"))
		require.Len(t, r.calls(), 2)
		require.Len(t, r.stream(t, "chatty"), maxHeld+2)
	})

	t.Run("ASlowAgentGetsTurnStartedOnItsOwnFirst", func(t *testing.T) {
		r, s := startedSink(t, "slow", 1, time.Millisecond)
		<-r.called // the linger ran out: turn.started went out alone
		require.Equal(t, [][]wire.EventType{{wire.EventStarted}}, r.calls())
		require.NoError(t, s.Delta(ctx, "late"))
		require.Equal(t, []wire.EventType{wire.EventStarted, wire.EventDelta}, r.stream(t, "slow"))
	})

	t.Run("RetryingAndStartedStayInOrderBeforeTheFirstEvent", func(t *testing.T) {
		r := newRecordedPublisher(t)
		s := r.sink("again", 2, forever)
		defer s.discard()
		s.hold(ctx, wire.NewEvent(wire.EventRetrying, wire.RetryingData{EventBase: s.base(), PreviousAttempt: 1}))
		s.hold(ctx, started(s))
		require.NoError(t, s.Delta(ctx, "x"))
		require.NoError(t, s.flushHeld(ctx))
		require.Equal(t, []wire.EventType{wire.EventRetrying, wire.EventStarted, wire.EventDelta}, r.stream(t, "again"))
	})

	t.Run("FlushHeldPublishesWhatTheAgentDidNot", func(t *testing.T) {
		r, s := startedSink(t, "silent", 1, forever)
		require.NoError(t, s.flushHeld(ctx))
		require.NoError(t, s.flushHeld(ctx), "nothing left to publish")
		require.Equal(t, [][]wire.EventType{{wire.EventStarted}}, r.calls())
	})

	t.Run("DiscardDropsHeldEvents", func(t *testing.T) {
		r := newRecordedPublisher(t)
		s := r.sink("lost", 1, forever)
		s.hold(ctx, started(s))
		s.discard()
		require.NoError(t, s.flushHeld(ctx))
		require.Empty(t, r.calls(), "the held turn.started was dropped")
	})

	t.Run("DiscardWaitsForTheLingersPublish", func(t *testing.T) {
		r := newRecordedPublisher(t)
		began, release := make(chan struct{}), make(chan struct{})
		var finished atomic.Bool
		s := r.sink("waited", 1, time.Millisecond)
		s.pub = publishFunc(func(ctx context.Context, ms []streams.Message) []streams.PublishResult {
			close(began)
			<-release
			defer finished.Store(true)
			return r.publish(ctx, ms)
		})
		s.hold(ctx, started(s))
		<-began
		returned := make(chan bool)
		go func() {
			s.discard()
			returned <- finished.Load()
		}()
		close(release)
		require.True(t, <-returned, "discard returned before the linger's publish had finished")
		require.Equal(t, []wire.EventType{wire.EventStarted}, r.stream(t, "waited"))
	})

	t.Run("AStaleTokenOnTurnStartedRefusesTheAgentsEvents", func(t *testing.T) {
		r := newRecordedPublisher(t)
		newer := r.sink("fenced", 7, forever)
		require.NoError(t, newer.send(ctx, []wire.Event{started(newer)}, 0))
		s := r.sink("fenced", 3, forever) // a zombie attempt
		defer s.discard()
		s.hold(ctx, started(s))
		require.NoError(t, s.Delta(ctx, "zombie"), "held: nothing was sent yet")
		err := s.ToolCall(ctx, agent.ToolCall{CallID: "c1", Name: "search"})
		require.ErrorIs(t, err, streams.ErrStaleToken)
		require.ErrorIs(t, s.heldFailure(), streams.ErrStaleToken)
		n := len(r.calls())
		require.ErrorIs(t, s.Delta(ctx, "again"), streams.ErrStaleToken)
		require.ErrorIs(t, s.release(), streams.ErrStaleToken, "the finished agent's attempt is refused")
		require.Len(t, r.calls(), n, "a refused agent event is not sent")
		require.Equal(t, []wire.EventType{wire.EventStarted}, r.stream(t, "fenced"))
	})

	t.Run("AStaleTokenOnTheLingersPublishRefusesTheAgentsEvents", func(t *testing.T) {
		r := newRecordedPublisher(t)
		newer := r.sink("fenced-late", 7, forever)
		require.NoError(t, newer.send(ctx, []wire.Event{started(newer)}, 0))
		<-r.called
		s := r.sink("fenced-late", 3, time.Millisecond)
		defer s.discard()
		s.hold(ctx, started(s))
		<-r.called // the linger's publish, refused
		require.ErrorIs(t, s.Delta(ctx, "zombie"), streams.ErrStaleToken)
		require.Len(t, r.calls(), 2, "a refused agent event is not sent")
		require.Equal(t, []wire.EventType{wire.EventStarted}, r.stream(t, "fenced-late"))
	})
}

func TestGroupOutcome(t *testing.T) {
	t.Parallel()
	ok := streams.PublishResult{}
	down := streams.PublishResult{Err: errors.New("connection refused")}
	stale := streams.PublishResult{Err: streams.ErrStaleToken}
	for _, tc := range []struct {
		name  string
		res   []streams.PublishResult
		done  int
		fails bool
		again bool
	}{
		{"all published", []streams.PublishResult{ok, ok}, 2, false, false},
		{"tail failed: sent again from the failure", []streams.PublishResult{ok, down, down}, 1, true, true},
		{"stale is final", []streams.PublishResult{stale, stale}, 0, true, false},
		{"a failure before a published event is final", []streams.PublishResult{down, ok}, 0, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done, again, err := groupOutcome(tc.res)
			require.Equal(t, tc.done, done)
			require.Equal(t, tc.fails, err != nil)
			require.Equal(t, tc.again, again)
		})
	}
}

// TestSinkSpans checks that a sampled turn's events each get a span, which their traceparent
// names, and that an unsampled turn's events carry the turn's own trace context without spans.
func TestSinkSpans(t *testing.T) {
	t.Parallel()
	r := newRecordedPublisher(t)
	var mu sync.Mutex
	var sent []streams.Message
	capture := func(ctx context.Context, ms []streams.Message) []streams.PublishResult {
		mu.Lock()
		sent = append(sent, ms...)
		mu.Unlock()
		return r.publish(ctx, ms)
	}
	take := func() []streams.Message {
		mu.Lock()
		defer mu.Unlock()
		out := sent
		sent = nil
		return out
	}
	turn := func(ctx context.Context, sessionID string) {
		s := r.sink(sessionID, 1, forever)
		s.pub = publishFunc(capture)
		defer s.discard()
		s.hold(ctx, started(s))
		require.NoError(t, s.Delta(ctx, "hi"))
		require.NoError(t, s.publishTerminal(ctx, wire.NewEvent(wire.EventCompleted, wire.CompletedData{EventBase: s.base()})))
	}

	t.Run("Sampled", func(t *testing.T) {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(rec))
		defer func() { require.NoError(t, tp.Shutdown(context.Background())) }()
		ctx, span := tp.Tracer("test").Start(context.Background(), "worker.turn")
		turn(ctx, "sampled")
		span.End()
		ms := take()
		require.Len(t, ms, 3)
		ended := rec.Ended()
		require.Len(t, ended, 4, "a span per event, and the turn's")
		ids := map[string]bool{}
		for _, s := range ended[:3] {
			require.Equal(t, span.SpanContext().SpanID(), s.Parent().SpanID(), "an event's span is a child of the turn's")
			ids[s.SpanContext().SpanID().String()] = true
		}
		for _, m := range ms {
			parts := strings.Split(m.Traceparent, "-")
			require.Len(t, parts, 4, m.Traceparent)
			require.True(t, ids[parts[2]], "traceparent %s names its event's span", m.Traceparent)
		}
	})

	t.Run("Unsampled", func(t *testing.T) {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()), sdktrace.WithSpanProcessor(rec))
		defer func() { require.NoError(t, tp.Shutdown(context.Background())) }()
		ctx, span := tp.Tracer("test").Start(context.Background(), "worker.turn")
		require.True(t, span.SpanContext().IsValid())
		turn(ctx, "unsampled")
		span.End()
		want := telemetry.Traceparent(ctx)
		require.NotEmpty(t, want)
		for _, m := range take() {
			require.Equal(t, want, m.Traceparent, "an unsampled turn's events carry its trace context")
		}
		require.Empty(t, rec.Ended())
	})
}

// failingFirst returns a publish func that answers the first n calls as an unreachable Redis
// would, and passes the rest to the recorded publisher; calls receives after every call.
func failingFirst(r *recordedPublisher, n int, calls chan<- struct{}) func(context.Context, []streams.Message) []streams.PublishResult {
	var seen atomic.Int32
	return func(ctx context.Context, ms []streams.Message) []streams.PublishResult {
		defer func() { calls <- struct{}{} }()
		if int(seen.Add(1)) > n {
			return r.publish(ctx, ms)
		}
		res := make([]streams.PublishResult, len(ms))
		for i := range res {
			res[i].Err = errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")
		}
		return res
	}
}

// refusingSink is startedSink whose publisher refuses the first n calls (failingFirst); calls
// receives after every call, and retries records each Hooks.PublishRetried call's terminal flag.
func refusingSink(t *testing.T, sessionID string, n int) (r *recordedPublisher, s *attemptSink, calls chan struct{}, retries *[]bool) {
	t.Helper()
	r, s = startedSink(t, sessionID, 1, forever)
	calls, retries = make(chan struct{}, 64), &[]bool{}
	s.pub = publishFunc(failingFirst(r, n, calls))
	s.retried = func(terminal bool) { *retries = append(*retries, terminal) }
	return r, s, calls, retries
}

func TestSinkTerminalPatience(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	completed := func(s *attemptSink) wire.Event {
		return wire.NewEvent(wire.EventCompleted, wire.CompletedData{EventBase: s.base()})
	}

	t.Run("ATerminalGroupOutlastsTheUsualFiveTries", func(t *testing.T) {
		r, s, calls, retries := refusingSink(t, "patient", 6)
		require.NoError(t, s.Delta(ctx, "hi"))
		// An agent that failed within the linger: its held events go out with the terminal event.
		require.NoError(t, s.publishTerminal(ctx, completed(s)))
		require.Len(t, calls, 7, "six refused calls, then the one that went through")
		require.Equal(t, []bool{true, true, true, true, true, true}, *retries, "each further try is counted as a terminal group's")
		require.Equal(t, []wire.EventType{wire.EventStarted, wire.EventDelta, wire.EventCompleted}, r.stream(t, "patient"))
	})

	t.Run("HeldEventsRedisDidNotTakeGoWithTheTerminal", func(t *testing.T) {
		r, s, calls, retries := refusingSink(t, "resent", 6)
		require.NoError(t, s.Delta(ctx, "hi"))
		require.NoError(t, s.release(), "the agent returned before any publish failed")
		require.True(t, received(calls), "the held group's publish began")
		require.NoError(t, s.publishTerminal(ctx, completed(s)))
		require.Len(t, calls, 6, "after the first: four more refused calls of the held group, one of the terminal group, then the one that went through")
		require.Equal(t, []bool{false, false, false, false, true}, *retries)
		require.Equal(t, []wire.EventType{wire.EventStarted, wire.EventDelta, wire.EventCompleted}, r.stream(t, "resent"))
	})

	t.Run("AnotherGroupGivesUpAfterFive", func(t *testing.T) {
		r, s, calls, retries := refusingSink(t, "impatient", 6)
		require.Error(t, s.flushHeld(ctx))
		require.Len(t, calls, 5)
		require.Equal(t, []bool{false, false, false, false}, *retries)
		require.Empty(t, r.stream(t, "impatient"))
	})

	t.Run("ADrainEndsTheWait", func(t *testing.T) {
		r, s, calls, _ := refusingSink(t, "drained", 1000)
		turnCtx, cancel := context.WithCancel(ctx)
		errc := make(chan error, 1)
		go func() { errc <- s.publishTerminal(turnCtx, completed(s)) }()
		<-calls
		<-calls
		cancel()
		require.Error(t, <-errc)
		require.Empty(t, r.stream(t, "drained"))
	})
}
