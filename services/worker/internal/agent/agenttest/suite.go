package agenttest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	contract "github.com/turnstile-run/turnstile/pkg/demo"
	"github.com/turnstile-run/turnstile/pkg/wire"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent"
)

// Scenario is what the upstream behind the agent does for every turn.
type Scenario struct {
	// Tokens is the number of words of the answer: pkg/demo.Reply(text, Knobs{Tokens: Tokens}).
	Tokens int
	// Tool: the answer starts with a call to a "clock" tool and its result.
	Tool bool
	// FailMidStream: the upstream reports an error after the first word.
	FailMidStream bool
	// Overload: the first request is refused with 429 and Retry-After: RetryAfter seconds.
	Overload   bool
	RetryAfter int
	// TokenDelay is a pause before each word.
	TokenDelay time.Duration
}

// Words returns the deltas a scenario must produce.
func (s Scenario) Words() []string { return contract.Reply("", contract.Knobs{Tokens: s.Tokens}) }

// Capabilities say which parts of the suite apply to an adapter.
type Capabilities struct {
	// Upstream: the agent calls a remote upstream that can refuse with 429 and Retry-After.
	Upstream bool
}

// Request is what an upstream received for one turn.
type Request struct {
	SessionID string
	TurnID    string
	Text      string
	// History holds the contents of the history messages the upstream saw, oldest first.
	History []string
}

// Recorder collects what an upstream received. Safe for concurrent use.
type Recorder struct {
	mu   sync.Mutex
	reqs []Request
}

// Add records a request.
func (r *Recorder) Add(req Request) {
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	r.mu.Unlock()
}

// Requests returns the requests received so far.
func (r *Recorder) Requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Request(nil), r.reqs...)
}

// Harness builds an agent whose upstream plays sc. The Recorder may be nil when there is no upstream.
type Harness func(t *testing.T, sc Scenario) (agent.Agent, *Recorder)

// Event is one event a Sink received.
type Event struct {
	Kind   string // delta, tool_call, tool_result, custom
	Text   string
	Call   agent.ToolCall
	Result agent.ToolResult
	// Name and Data are a custom event's (agent.CustomSink).
	Name string
	Data json.RawMessage
}

// Sink records events and waits (it is an agent.Waiter); FailAt > 0 makes the FailAt-th event
// fail with ErrSink.
type Sink struct {
	mu     sync.Mutex
	events []Event
	waits  []agent.Wait
	FailAt int
	// OnEvent, when set, is called after each recorded event.
	OnEvent func(Event)
	// OnWait, when set, is called as each wait begins.
	OnWait func(agent.Wait)
}

var _ agent.Waiter = (*Sink)(nil)

// Waiting implements agent.Waiter: it records the wait.
func (s *Sink) Waiting(_ context.Context, w agent.Wait) (func(), error) {
	s.mu.Lock()
	s.waits = append(s.waits, w)
	s.mu.Unlock()
	if s.OnWait != nil {
		s.OnWait(w)
	}
	return func() {}, nil
}

// Waits returns the recorded waits.
func (s *Sink) Waits() []agent.Wait {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]agent.Wait(nil), s.waits...)
}

// ErrSink is the error a Sink returns at FailAt.
var ErrSink = errors.New("agenttest: sink refused the event")

func (s *Sink) add(ev Event) error {
	s.mu.Lock()
	if s.FailAt > 0 && len(s.events)+1 == s.FailAt {
		s.mu.Unlock()
		return ErrSink
	}
	s.events = append(s.events, ev)
	s.mu.Unlock()
	if s.OnEvent != nil {
		s.OnEvent(ev)
	}
	return nil
}

// Delta implements agent.Sink.
func (s *Sink) Delta(_ context.Context, text string) error {
	return s.add(Event{Kind: "delta", Text: text})
}

// ToolCall implements agent.Sink.
func (s *Sink) ToolCall(_ context.Context, c agent.ToolCall) error {
	return s.add(Event{Kind: "tool_call", Call: c})
}

// ToolResult implements agent.Sink.
func (s *Sink) ToolResult(_ context.Context, r agent.ToolResult) error {
	return s.add(Event{Kind: "tool_result", Result: r})
}

// Custom implements agent.CustomSink.
func (s *Sink) Custom(_ context.Context, name string, data json.RawMessage) error {
	return s.add(Event{Kind: "custom", Name: name, Data: data})
}

// Events returns the recorded events.
func (s *Sink) Events() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Event(nil), s.events...)
}

// Deltas returns the texts of the recorded deltas.
func (s *Sink) Deltas() []string {
	var out []string
	for _, e := range s.Events() {
		if e.Kind == "delta" {
			out = append(out, e.Text)
		}
	}
	return out
}

// NewTurn returns a turn with fresh IDs and a deadline d from now.
func NewTurn(text string, d time.Duration) agent.Turn {
	n := time.Now().UnixNano()
	return agent.Turn{
		TurnID: fmt.Sprintf("00000000-0000-4000-8000-%012x", n&0xffffffffffff), SessionID: fmt.Sprintf("session-%d", n),
		Tenant: "t", Attempt: 1, Text: text, Metadata: map[string]any{}, Deadline: time.Now().Add(d),
	}
}

var history = []agent.Message{
	{Seq: 1, TurnID: "00000000-0000-4000-8000-000000000001", Role: "user", Content: "earlier question"},
	{Seq: 2, TurnID: "00000000-0000-4000-8000-000000000001", Role: "assistant", Content: "earlier answer"},
}

func run(t *testing.T, ag agent.Agent, turn agent.Turn, sink *Sink) (agent.Result, error) {
	t.Helper()
	ctx, cancel := context.WithDeadline(context.Background(), turn.Deadline)
	defer cancel()
	return ag.Run(ctx, turn, history, sink)
}

// Run runs the conformance suite against h.
func Run(t *testing.T, caps Capabilities, h Harness) {
	t.Run("StreamsDeltasInOrder", func(t *testing.T) {
		t.Parallel()
		sc := Scenario{Tokens: 6}
		ag, rec := h(t, sc)
		turn := NewTurn("hello there", 30*time.Second)
		sink := &Sink{}
		res, err := run(t, ag, turn, sink)
		require.NoError(t, err)
		require.Equal(t, sc.Words(), sink.Deltas())
		require.Equal(t, strings.Join(sc.Words(), ""), res.Text)
		if rec != nil {
			reqs := rec.Requests()
			require.Len(t, reqs, 1)
			require.Equal(t, "hello there", reqs[0].Text)
			require.Equal(t, []string{"earlier question", "earlier answer"}, reqs[0].History)
			if reqs[0].SessionID != "" {
				require.Equal(t, turn.SessionID, reqs[0].SessionID)
				require.Equal(t, turn.TurnID, reqs[0].TurnID)
			}
		}
	})
	t.Run("ToolCallBeforeResult", func(t *testing.T) {
		t.Parallel()
		sc := Scenario{Tokens: 3, Tool: true}
		ag, _ := h(t, sc)
		sink := &Sink{}
		res, err := run(t, ag, NewTurn("what time is it", 30*time.Second), sink)
		require.NoError(t, err)
		evs := sink.Events()
		require.GreaterOrEqual(t, len(evs), 2)
		require.Equal(t, "tool_call", evs[0].Kind)
		require.Equal(t, "clock", evs[0].Call.Name)
		require.NotEmpty(t, evs[0].Call.CallID)
		require.True(t, json.Valid(evs[0].Call.Arguments), "arguments %q", evs[0].Call.Arguments)
		require.Equal(t, "tool_result", evs[1].Kind)
		require.Equal(t, evs[0].Call.CallID, evs[1].Result.CallID)
		require.Equal(t, sc.Words(), sink.Deltas())
		require.Equal(t, strings.Join(sc.Words(), ""), res.Text)
	})
	t.Run("MidStreamErrorFailsRetryably", func(t *testing.T) {
		t.Parallel()
		ag, _ := h(t, Scenario{Tokens: 5, FailMidStream: true})
		sink := &Sink{}
		_, err := run(t, ag, NewTurn("fail please", 30*time.Second), sink)
		require.Error(t, err)
		require.NotErrorIs(t, err, agent.ErrPermanent)
		require.LessOrEqual(t, len(sink.Deltas()), 1)
	})
	t.Run("CancelEndsPromptly", func(t *testing.T) {
		t.Parallel()
		ag, _ := h(t, Scenario{Tokens: 100, TokenDelay: 100 * time.Millisecond})
		turn := NewTurn("slow", time.Minute)
		ctx, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		first := make(chan struct{})
		var once sync.Once
		sink := &Sink{OnEvent: func(Event) { once.Do(func() { close(first) }) }}
		done := make(chan error, 1)
		go func() {
			_, err := ag.Run(ctx, turn, history, sink)
			done <- err
		}()
		select {
		case <-first:
		case <-time.After(20 * time.Second):
			t.Fatal("no delta within 20s")
		}
		cancel(errors.New("turn cancelled"))
		select {
		case err := <-done:
			require.Error(t, err)
		case <-time.After(10 * time.Second):
			t.Fatal("agent did not return within 10s of cancellation")
		}
		require.Less(t, len(sink.Deltas()), 100)
	})
	t.Run("SinkErrorStopsTheRun", func(t *testing.T) {
		t.Parallel()
		ag, _ := h(t, Scenario{Tokens: 8})
		sink := &Sink{FailAt: 3}
		_, err := run(t, ag, NewTurn("stop", 30*time.Second), sink)
		require.ErrorIs(t, err, ErrSink)
		require.Len(t, sink.Deltas(), 2)
	})
	t.Run("ConcurrentTurns", func(t *testing.T) {
		t.Parallel()
		sc := Scenario{Tokens: 4}
		ag, _ := h(t, sc)
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for i := range 8 {
			wg.Go(func() {
				sink := &Sink{}
				res, err := run(t, ag, NewTurn(fmt.Sprintf("turn %d", i), 30*time.Second), sink)
				if err == nil && res.Text != strings.Join(sc.Words(), "") {
					err = fmt.Errorf("turn %d: output %q", i, res.Text)
				}
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
	})
	if !caps.Upstream {
		return
	}
	t.Run("RetryAfterHonouredBeforeDeadline", func(t *testing.T) {
		t.Parallel()
		sc := Scenario{Tokens: 3, Overload: true, RetryAfter: 1}
		ag, rec := h(t, sc)
		sink := &Sink{}
		start := time.Now()
		res, err := run(t, ag, NewTurn("busy", 30*time.Second), sink)
		require.NoError(t, err)
		require.GreaterOrEqual(t, time.Since(start), 900*time.Millisecond, "the retry waited for Retry-After")
		require.Equal(t, strings.Join(sc.Words(), ""), res.Text)
		require.Equal(t, sc.Words(), sink.Deltas())
		if rec != nil {
			require.Len(t, rec.Requests(), 2)
		}
		waits := sink.Waits()
		require.Len(t, waits, 1, "the wait for Retry-After was announced")
		require.Contains(t, []string{wire.WaitRateLimited, wire.WaitOverloaded}, waits[0].Reason)
		// The next try is Retry-After from the upstream's answer, which came after start and before
		// the retry that ended the turn: bounds that hold however slow the machine is.
		end := time.Now()
		retryAfter := time.Duration(sc.RetryAfter) * time.Second
		require.False(t, waits[0].RetryAt.Before(start.Add(retryAfter-50*time.Millisecond)),
			"the wait names the next try: %s is less than Retry-After after the start", waits[0].RetryAt.Sub(start))
		require.False(t, waits[0].RetryAt.After(end),
			"the wait names the next try: %s is after the retry that ended the turn", waits[0].RetryAt.Sub(end))
		require.Error(t, waits[0].Err, "the wait names the upstream's answer")
	})
	t.Run("RetryAfterPastDeadlineFailsFast", func(t *testing.T) {
		t.Parallel()
		// A Retry-After past the deadline ends the turn at once. An agent that waited instead
		// would use the whole deadline; half of it tells the two apart on a busy machine.
		const deadline = 20 * time.Second
		ag, _ := h(t, Scenario{Tokens: 3, Overload: true, RetryAfter: 60})
		start := time.Now()
		_, err := run(t, ag, NewTurn("busy", deadline), &Sink{})
		require.Error(t, err)
		require.Less(t, time.Since(start), deadline/2, "did not wait for a pause past the deadline")
	})
}

// RunUnreachable checks an agent whose upstream refuses connections: it waits for the upstream,
// announcing the wait with reason upstream_unavailable, and fails only when the turn's deadline
// leaves it no useful time, with an error that matches agent.ErrUnavailable and names the refusal.
// build returns the agent for an upstream at url (http://host:port, where nothing listens).
func RunUnreachable(t *testing.T, build func(t *testing.T, url string) agent.Agent) {
	t.Helper()
	// Port 1 (tcpmux) has no listener and is never handed out as an ephemeral port: a port freed
	// by closing a listener can be taken by another test's server on a busy machine, which then
	// answers the agent.
	ag := build(t, "http://127.0.0.1:1")
	sink := &Sink{}
	start := time.Now()
	_, err := run(t, ag, NewTurn("anyone there?", 2*time.Second), sink)
	took := time.Since(start)
	t.Logf("gave up after %v: %v", took.Round(time.Millisecond), err)
	require.ErrorIs(t, err, agent.ErrUnavailable)
	require.ErrorContains(t, err, "upstream_unavailable after ")
	require.ErrorContains(t, err, "connection refused")
	require.GreaterOrEqual(t, took, time.Second, "waited for the upstream rather than failing at once")
	waits := sink.Waits()
	require.NotEmpty(t, waits)
	for _, w := range waits {
		require.Equal(t, wire.WaitUpstreamUnavailable, w.Reason)
	}
}
