package a2a_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/turnstile-run/turnstile/services/worker/internal/agent"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/a2a"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/agenttest"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/upstream"
)

func TestMain(m *testing.M) {
	if addr := os.Getenv(replicaEnv); addr != "" {
		serveReplica(addr)
		return
	}
	goleak.VerifyTestMain(m)
}

// executor is a remote A2A agent playing a scenario, served by the a2a-go server stack.
type executor struct {
	sc        agenttest.Scenario
	rec       *agenttest.Recorder
	cancelled chan sdk.TaskID
	once      sync.Once
	// end is the final state the task ends in; empty means completed.
	end sdk.TaskState
	// fullAtEnd sends the artifact's whole text once more as a replacement before the task ends,
	// as turnstile's own A2A front door does.
	fullAtEnd bool
	// metadata receives each request message's metadata, when set.
	metadata chan map[string]any
	// custom sends that many custom data parts, one in a working status message before each of
	// the first words.
	custom int
	// usage is reported in metadata "usage": each but the last on a working status update, the
	// last on the final one.
	usage []map[string]any
}

func (x *executor) Execute(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	req := agenttest.Request{SessionID: rc.Message.ContextID, TurnID: rc.Message.ID}
	for _, p := range rc.Message.Parts {
		if tp, ok := p.(sdk.TextPart); ok {
			req.Text += tp.Text
		}
	}
	if h, ok := rc.Message.Metadata[a2a.HistoryKey].([]any); ok {
		for _, m := range h {
			req.History = append(req.History, fmt.Sprint(m.(map[string]any)["content"]))
		}
	}
	x.rec.Add(req)
	if x.metadata != nil {
		x.metadata <- rc.Message.Metadata
	}
	task := &sdk.Task{ID: rc.TaskID, ContextID: rc.ContextID}
	write := func(ev sdk.Event) error {
		if x.sc.TokenDelay > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(x.sc.TokenDelay):
			}
		}
		return q.Write(ctx, ev)
	}
	if err := write(sdk.NewStatusUpdateEvent(task, sdk.TaskStateSubmitted, nil)); err != nil {
		return err
	}
	if x.sc.Tool {
		call := sdk.NewMessage(sdk.MessageRoleAgent, sdk.DataPart{Data: map[string]any{"tool_call": map[string]any{"call_id": "t1", "name": "clock", "arguments": map[string]any{"tz": "UTC"}}}})
		res := sdk.NewMessage(sdk.MessageRoleAgent, sdk.DataPart{Data: map[string]any{"tool_result": map[string]any{"call_id": "t1", "result": map[string]any{"time": "noon"}}}})
		if err := write(sdk.NewStatusUpdateEvent(task, sdk.TaskStateWorking, call)); err != nil {
			return err
		}
		if err := write(sdk.NewStatusUpdateEvent(task, sdk.TaskStateWorking, res)); err != nil {
			return err
		}
	}
	var artifact sdk.ArtifactID
	for i, w := range x.sc.Words() {
		if i < x.custom {
			msg := sdk.NewMessage(sdk.MessageRoleAgent, sdk.DataPart{Data: map[string]any{"custom": map[string]any{"name": "progress", "data": map[string]any{"step": i + 1}}}})
			if err := write(sdk.NewStatusUpdateEvent(task, sdk.TaskStateWorking, msg)); err != nil {
				return err
			}
		}
		var ev *sdk.TaskArtifactUpdateEvent
		if i == 0 {
			ev = sdk.NewArtifactEvent(task, sdk.TextPart{Text: w})
			artifact = ev.Artifact.ID
		} else {
			ev = sdk.NewArtifactUpdateEvent(task, artifact, sdk.TextPart{Text: w})
		}
		if err := write(ev); err != nil {
			return err
		}
		if x.sc.FailMidStream && i == 0 {
			failed := sdk.NewStatusUpdateEvent(task, sdk.TaskStateFailed, sdk.NewMessage(sdk.MessageRoleAgent, sdk.TextPart{Text: "model crashed"}))
			failed.Final = true
			return q.Write(ctx, failed)
		}
	}
	if x.fullAtEnd {
		whole := sdk.NewArtifactUpdateEvent(task, artifact, sdk.TextPart{Text: strings.Join(x.sc.Words(), "")})
		whole.Append, whole.LastChunk = false, true
		if err := write(whole); err != nil {
			return err
		}
	}
	end := sdk.TaskStateCompleted
	if x.end != "" {
		end = x.end
	}
	done := sdk.NewStatusUpdateEvent(task, end, nil)
	done.Final = true
	for i, u := range x.usage {
		if i == len(x.usage)-1 {
			done.Metadata = map[string]any{"usage": u}
			break
		}
		working := sdk.NewStatusUpdateEvent(task, sdk.TaskStateWorking, nil)
		working.Metadata = map[string]any{"usage": u}
		if err := write(working); err != nil {
			return err
		}
	}
	return q.Write(ctx, done)
}

func (x *executor) Cancel(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	x.once.Do(func() { x.cancelled <- rc.TaskID })
	ev := sdk.NewStatusUpdateEvent(&sdk.Task{ID: rc.TaskID, ContextID: rc.ContextID}, sdk.TaskStateCanceled, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

// protocols are the versions every test of the agent runs under: the remote agent's card offers
// the version, and the agent must speak it.
var protocols = []string{a2a.Protocol03, a2a.Protocol10}

func setup(t *testing.T, sc agenttest.Scenario, protocol string) (*a2a.Agent, *agenttest.Recorder, *executor) {
	return setupEnd(t, sc, "", protocol)
}

// setupEnd is setup with a remote task that ends in the state end (completed when empty).
func setupEnd(t *testing.T, sc agenttest.Scenario, end sdk.TaskState, protocol string) (*a2a.Agent, *agenttest.Recorder, *executor) {
	rec := &agenttest.Recorder{}
	x := &executor{sc: sc, rec: rec, cancelled: make(chan sdk.TaskID, 1), end: end}
	rpc := upstreamOf(t, a2asrv.NewHandler(x), protocol)
	var posts atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && sc.Overload && posts.Add(1) == 1 {
			rec.Add(agenttest.Request{})
			w.Header().Set("Retry-After", fmt.Sprint(sc.RetryAfter))
			http.Error(w, "too many requests", http.StatusTooManyRequests)
			return
		}
		rpc.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	ag, err := a2a.New(t.Context(), a2a.Config{URL: srv.URL, Guard: upstream.New(upstream.Config{Name: "test", Backoff: 10 * time.Millisecond})})
	require.NoError(t, err)
	t.Cleanup(func() { _ = ag.Close() })
	return ag, rec, x
}

func TestConformance(t *testing.T) {
	t.Parallel()
	for _, protocol := range protocols {
		t.Run("V"+protocol, func(t *testing.T) {
			t.Parallel()
			agenttest.Run(t, agenttest.Capabilities{Upstream: true}, func(t *testing.T, sc agenttest.Scenario) (agent.Agent, *agenttest.Recorder) {
				ag, rec, _ := setup(t, sc, protocol)
				return ag, rec
			})
		})
	}
}

func TestUnreachable(t *testing.T) {
	t.Parallel()
	agenttest.RunUnreachable(t, func(t *testing.T, url string) agent.Agent {
		ag, err := a2a.New(t.Context(), a2a.Config{URL: url, Guard: upstream.New(upstream.Config{Name: "test", Backoff: 10 * time.Millisecond})})
		require.NoError(t, err)
		t.Cleanup(func() { _ = ag.Close() })
		return ag
	})
}

func TestCancelIsForwarded(t *testing.T) {
	t.Parallel()
	for _, protocol := range protocols {
		t.Run("V"+protocol, func(t *testing.T) {
			t.Parallel()
			testCancelIsForwarded(t, protocol)
		})
	}
}

func testCancelIsForwarded(t *testing.T, protocol string) {
	ag, _, x := setup(t, agenttest.Scenario{Tokens: 100, TokenDelay: 50 * time.Millisecond}, protocol)
	ctx, cancel := context.WithCancelCause(context.Background())
	first := make(chan struct{})
	var once sync.Once
	sink := &agenttest.Sink{OnEvent: func(agenttest.Event) { once.Do(func() { close(first) }) }}
	done := make(chan error, 1)
	go func() {
		_, err := ag.Run(ctx, agenttest.NewTurn("long", time.Minute), nil, sink)
		done <- err
	}()
	<-first
	cancel(errors.New("cancel requested"))
	select {
	case id := <-x.cancelled:
		require.NotEmpty(t, id)
	case <-time.After(10 * time.Second):
		t.Fatal("tasks/cancel did not reach the remote agent")
	}
	require.Error(t, <-done)
}

// TestWaitingForUserEndsTurnWithState checks that a remote task ending in input-required or
// auth-required ends the turn successfully with that state as the output's, the streamed text as
// its text, and no retry.
func TestWaitingForUserEndsTurnWithState(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		end      sdk.TaskState
		protocol string
	}{
		{sdk.TaskStateInputRequired, a2a.Protocol03},
		{sdk.TaskStateAuthRequired, a2a.Protocol03},
		{sdk.TaskStateInputRequired, a2a.Protocol10},
		{sdk.TaskStateAuthRequired, a2a.Protocol10},
	} {
		end := c.end
		t.Run(string(end)+"V"+c.protocol, func(t *testing.T) {
			t.Parallel()
			sc := agenttest.Scenario{Tokens: 3}
			ag, rec, _ := setupEnd(t, sc, end, c.protocol)
			res, err := ag.Run(t.Context(), agenttest.NewTurn("which city?", time.Minute), nil, &agenttest.Sink{})
			require.NoError(t, err)
			require.Equal(t, string(end), res.State)
			require.Equal(t, strings.Join(sc.Words(), ""), res.Text)
			require.Len(t, rec.Requests(), 1, "the remote agent ran once")
		})
	}
}

// TestFullTextAtEndIsNotRepeated: a remote agent that streams its answer in chunks and then sends
// the whole text again as a replacement of the same artifact (turnstile's own /a2a does) is
// relayed once; the turn's metadata reaches the remote agent beside turnstile's own keys, and every
// request carries the turn's absolute deadline as X-Deadline-Epoch-Ms.
func TestFullTextAtEndIsNotRepeated(t *testing.T) {
	t.Parallel()
	sc := agenttest.Scenario{Tokens: 5}
	x := &executor{sc: sc, rec: &agenttest.Recorder{}, cancelled: make(chan sdk.TaskID, 1), fullAtEnd: true, metadata: make(chan map[string]any, 1)}
	rpc := upstreamOf(t, a2asrv.NewHandler(x), a2a.Protocol03)
	deadlines := make(chan string, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			deadlines <- r.Header.Get(a2a.DeadlineHeader)
		}
		rpc.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	ag, err := a2a.New(t.Context(), a2a.Config{URL: srv.URL})
	require.NoError(t, err)
	t.Cleanup(func() { _ = ag.Close() })

	turn := agenttest.NewTurn("hello", time.Minute)
	turn.Metadata = map[string]any{"customer": "c-42"}
	ctx, cancel := context.WithDeadline(t.Context(), turn.Deadline)
	defer cancel()
	sink := &agenttest.Sink{}
	res, err := ag.Run(ctx, turn, nil, sink)
	require.NoError(t, err)
	whole := strings.Join(sc.Words(), "")
	require.Equal(t, whole, res.Text)
	require.Equal(t, whole, strings.Join(sink.Deltas(), ""), "the answer is relayed once")

	meta := <-x.metadata
	require.Equal(t, "c-42", meta["customer"], "the turn's metadata reaches the remote agent")
	require.Contains(t, meta, a2a.HistoryKey)
	require.Equal(t, strconv.FormatInt(turn.Deadline.UnixMilli(), 10), <-deadlines)
}

// TestCustomEventsRelayed: data parts {"custom": {"name", "data"}} of a remote agent's working
// status messages become custom events, in order with the answer's deltas, and no part of it.
func TestCustomEventsRelayed(t *testing.T) {
	t.Parallel()
	sc := agenttest.Scenario{Tokens: 3}
	x := &executor{sc: sc, rec: &agenttest.Recorder{}, cancelled: make(chan sdk.TaskID, 1), custom: 2}
	srv := httptest.NewServer(a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(x)))
	t.Cleanup(srv.Close)
	ag, err := a2a.New(t.Context(), a2a.Config{URL: srv.URL})
	require.NoError(t, err)
	t.Cleanup(func() { _ = ag.Close() })

	sink := &agenttest.Sink{}
	res, err := ag.Run(t.Context(), agenttest.NewTurn("hello", time.Minute), nil, sink)
	require.NoError(t, err)
	words := sc.Words()
	require.Equal(t, strings.Join(words, ""), res.Text, "custom events are no part of the answer")
	var got []string
	for _, ev := range sink.Events() {
		switch ev.Kind {
		case "custom":
			got = append(got, ev.Name+" "+string(ev.Data))
		case "delta":
			got = append(got, ev.Text)
		}
	}
	require.Equal(t, []string{`progress {"step":1}`, words[0], `progress {"step":2}`, words[1], words[2]}, got)
}

// TestUsageFromMetadata: a remote agent's usage in event metadata ("usage") is the turn's, the
// last report winning (each is the task's usage so far), in both protocol versions; an agent that
// reports none leaves the turn without usage.
func TestUsageFromMetadata(t *testing.T) {
	t.Parallel()
	for _, protocol := range protocols {
		t.Run("V"+protocol, func(t *testing.T) {
			t.Parallel()
			ag, _, x := setup(t, agenttest.Scenario{Tokens: 2}, protocol)
			x.usage = []map[string]any{
				{"input_tokens": 40, "output_tokens": 3, "model": "remote-small"},
				{"input_tokens": 40, "output_tokens": 11, "model": "remote-small"},
			}
			res, err := ag.Run(t.Context(), agenttest.NewTurn("count me", time.Minute), nil, &agenttest.Sink{})
			require.NoError(t, err)
			require.Equal(t, &agent.Usage{PromptTokens: 40, CompletionTokens: 11, TotalTokens: 51, Model: "remote-small"}, res.Usage)

			x.usage = nil
			res, err = ag.Run(t.Context(), agenttest.NewTurn("count me not", time.Minute), nil, &agenttest.Sink{})
			require.NoError(t, err)
			require.Nil(t, res.Usage, "no usage reported, none recorded")
		})
	}
}
