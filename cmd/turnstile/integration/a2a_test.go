package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/turnstile-run/turnstile/pkg/apikey"
	"github.com/turnstile-run/turnstile/pkg/app"
	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/demo"
	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/pkg/wire"
	a2asrv "github.com/turnstile-run/turnstile/services/a2a"
)

// a2aStack is the whole platform in this process with TURNSTILE_AUTH=on and the a2a role, and an
// API key for each of two tenants.
type a2aStack struct {
	env        *testenv.Env
	stack      *app.Stack
	base       string
	keyA, keyB string
}

func startA2AStack(t *testing.T) *a2aStack {
	t.Helper()
	return startA2AStackWith(t, "intake,worker,gateway,a2a", nil)
}

// startA2AStackWith starts the a2a stack with roles, its configuration changed by tune (if set).
func startA2AStackWith(t *testing.T, roles string, tune func(*config.Config)) *a2aStack {
	t.Helper()
	env := testenv.New(t, testenv.Options{Partitions: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, keyA, err := apikey.Create(ctx, env.Pool, "acme")
	require.NoError(t, err)
	_, keyB, err := apikey.Create(ctx, env.Pool, "globex")
	require.NoError(t, err)
	cfg := authConfig(env, roles)
	cfg.A2A.Name, cfg.A2A.Version = "turnstile-test", "9.9.9"
	cfg.A2A.Skills = "chat:Chat:Answers a message,echo:Echo:Says it again"
	// KafkaSlowIsRetryable holds Kafka's acknowledgement back; intake gives up after this.
	cfg.ProduceTimeout = time.Second
	if tune != nil {
		tune(&cfg)
	}
	stack := startStackCfg(t, env, cfg)
	return &a2aStack{env: env, stack: stack, base: "http://" + stack.Addr(), keyA: keyA, keyB: keyB}
}

// lastEventKey carries a Last-Event-ID for the interceptor to send.
type lastEventKey struct{}

func withLastEventID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, lastEventKey{}, id)
}

// a2aAuth is the client's interceptor: the API key, a Last-Event-ID the context carries, and any
// extra headers.
type a2aAuth struct {
	a2aclient.PassthroughInterceptor
	key   string
	extra map[string]string
}

func (a a2aAuth) Before(ctx context.Context, req *a2aclient.Request) (context.Context, error) {
	if a.key != "" {
		req.Meta["Authorization"] = []string{"Bearer " + a.key}
	}
	if id, ok := ctx.Value(lastEventKey{}).(string); ok {
		req.Meta["Last-Event-ID"] = []string{id}
	}
	for k, v := range a.extra {
		req.Meta[k] = []string{v}
	}
	return ctx, nil
}

// client is an official a2a-go client built from the stack's Agent Card, for the tenant of key.
func (s *a2aStack) client(t *testing.T, key string, extra map[string]string) *a2aclient.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	card, err := agentcard.DefaultResolver.Resolve(ctx, s.base)
	require.NoError(t, err)
	c, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithInterceptors(a2aAuth{key: key, extra: extra}))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Destroy() })
	return c
}

func a2aMessage(text string, md map[string]any) *a2a.Message {
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: text})
	m.Metadata = md
	return m
}

func ptr[T any](v T) *T { return &v }

// taskResult returns a function asserting that a send answered a task.
func taskResult(t *testing.T) func(a2a.SendMessageResult, error) *a2a.Task {
	t.Helper()
	return func(r a2a.SendMessageResult, err error) *a2a.Task {
		t.Helper()
		require.NoError(t, err)
		task, ok := r.(*a2a.Task)
		require.True(t, ok, "result is %T", r)
		return task
	}
}

// artifactText is the text of a task's artifact id.
func artifactText(task *a2a.Task, id a2a.ArtifactID) string {
	for _, a := range task.Artifacts {
		if a.ID == id {
			var b strings.Builder
			for _, p := range a.Parts {
				if tp, ok := p.(a2a.TextPart); ok {
					b.WriteString(tp.Text)
				}
			}
			return b.String()
		}
	}
	return ""
}

// eventID is the SSE id an event carries in its metadata ("0" for the Task that opens a stream).
func eventID(ev a2a.Event) string {
	var md map[string]any
	switch e := ev.(type) {
	case *a2a.Task:
		return "0"
	case *a2a.TaskStatusUpdateEvent:
		md = e.Metadata
	case *a2a.TaskArtifactUpdateEvent:
		md = e.Metadata
	}
	id, _ := md["turnstile/event_id"].(string)
	return id
}

// collect reads a stream to its end, stopping early when stop says so; it fails on a stream error.
func collect(t *testing.T, seq func(yield func(a2a.Event, error) bool), stop func([]a2a.Event) bool) []a2a.Event {
	t.Helper()
	var evs []a2a.Event
	for ev, err := range seq {
		require.NoError(t, err)
		evs = append(evs, ev)
		if stop != nil && stop(evs) {
			break
		}
	}
	return evs
}

// streamedText is what a client that applies artifact updates as A2A says ends with: append adds,
// a non-append update replaces.
func streamedText(evs []a2a.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		if e, ok := ev.(*a2a.TaskArtifactUpdateEvent); ok {
			if !e.Append {
				b.Reset()
			}
			for _, p := range e.Artifact.Parts {
				if tp, ok := p.(a2a.TextPart); ok {
					b.WriteString(tp.Text)
				}
			}
		}
	}
	return b.String()
}

// finalStates lists the states of the final status-updates of a stream.
func finalStates(evs []a2a.Event) []a2a.TaskState {
	var out []a2a.TaskState
	for _, ev := range evs {
		if e, ok := ev.(*a2a.TaskStatusUpdateEvent); ok && e.Final {
			out = append(out, e.Status.State)
		}
	}
	return out
}

// topicEnd sums the end offsets of the turns topic: what intake ever produced.
func topicEnd(t *testing.T, env *testenv.Env) int64 {
	t.Helper()
	var sum int64
	withAdmin(t, env, func(ctx context.Context, adm *kadm.Client) {
		ends, err := adm.ListEndOffsets(ctx, env.Config.Topic)
		require.NoError(t, err)
		ends.Each(func(o kadm.ListedOffset) {
			require.NoError(t, o.Err)
			sum += o.Offset
		})
	})
	return sum
}

// TestA2A drives the A2A front door with the official a2a-go client, over an auth-on stack: the
// Agent Card, sends (blocking and not), streams, reads, cancels, resubscribe after a cut, a task
// that waits for input and its follow-up, one messageId sent five times at once, another tenant's
// task, and a table of bad requests that must produce nothing in Kafka.
func TestA2A(t *testing.T) {
	t.Parallel()
	s := startA2AStack(t)
	c := s.client(t, s.keyA, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	t.Run("AgentCard", func(t *testing.T) {
		resp, err := http.Get(s.base + "/.well-known/agent-card.json")
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		// The card also carries protocol 1.0's members (TestA2AV1SDK reads them with the 1.0
		// client); without them, every field is the 0.3 SDK's.
		var members map[string]json.RawMessage
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&members))
		for _, v1 := range []string{"supportedInterfaces", "securityRequirements"} {
			require.Contains(t, members, v1)
			delete(members, v1)
		}
		rest, err := json.Marshal(members)
		require.NoError(t, err)
		dec := json.NewDecoder(bytes.NewReader(rest))
		dec.DisallowUnknownFields()
		var card a2a.AgentCard
		require.NoError(t, dec.Decode(&card), "the card decodes into the SDK's AgentCard, every 0.3 field known")
		require.Equal(t, "turnstile-test", card.Name)
		require.Equal(t, "9.9.9", card.Version)
		require.Equal(t, s.base+"/a2a", card.URL)
		require.Equal(t, a2a.TransportProtocolJSONRPC, card.PreferredTransport)
		require.True(t, card.Capabilities.Streaming)
		require.True(t, card.Capabilities.PushNotifications, "push configs are offered")
		require.Len(t, card.Skills, 2)
		require.Equal(t, "echo", card.Skills[1].ID)
		require.Contains(t, card.SecuritySchemes, a2a.SecuritySchemeName("apiKey"))
		scheme, ok := card.SecuritySchemes["apiKey"].(a2a.HTTPAuthSecurityScheme)
		require.True(t, ok, "%T", card.SecuritySchemes["apiKey"])
		require.Equal(t, "Bearer", scheme.Scheme)
		require.Len(t, card.Security, 1)
	})

	t.Run("SendNonBlocking", func(t *testing.T) {
		task := taskResult(t)(c.SendMessage(ctx, &a2a.MessageSendParams{
			Message: a2aMessage("not waiting", nil), Config: &a2a.MessageSendConfig{Blocking: ptr(false)},
		}))
		require.Equal(t, a2a.TaskStateSubmitted, task.Status.State)
		require.NotEmpty(t, task.ContextID, "a message without contextId gets a session")
		testenv.WaitFor(t, 30*time.Second, "the task to complete", func() bool {
			got, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID})
			require.NoError(t, err)
			return got.Status.State == a2a.TaskStateCompleted
		})
		got, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID})
		require.NoError(t, err)
		require.Equal(t, demo.Output("not waiting", demo.Knobs{}), artifactText(got, a2a.ArtifactID("response-"+string(task.ID))))
	})

	t.Run("SendBlockingAndGet", func(t *testing.T) {
		task := taskResult(t)(c.SendMessage(ctx, &a2a.MessageSendParams{Message: a2aMessage("wait for me", nil)}))
		require.Equal(t, a2a.TaskStateCompleted, task.Status.State)
		want := demo.Output("wait for me", demo.Knobs{})
		require.Equal(t, want, artifactText(task, a2a.ArtifactID("response-"+string(task.ID))))
		got, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID})
		require.NoError(t, err)
		require.Equal(t, task.ContextID, got.ContextID)
		require.Len(t, got.History, 2)
		require.Equal(t, a2a.MessageRoleUser, got.History[0].Role)
		require.Equal(t, a2a.MessageRoleAgent, got.History[1].Role)
		one, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID, HistoryLength: ptr(1)})
		require.NoError(t, err)
		require.Len(t, one.History, 1, "historyLength keeps the newest")
		require.Equal(t, a2a.MessageRoleAgent, one.History[0].Role)
	})

	t.Run("Stream", func(t *testing.T) {
		text := "stream it with a tool"
		evs := collect(t, c.SendStreamingMessage(ctx, &a2a.MessageSendParams{
			Message: a2aMessage(text, map[string]any{"demo": map[string]any{"tool": true, "tokens": 12}}),
		}), nil)
		require.NotEmpty(t, evs)
		first, ok := evs[0].(*a2a.Task)
		require.True(t, ok, "the stream opens with the Task, got %T", evs[0])
		require.Equal(t, a2a.TaskStateSubmitted, first.Status.State)
		var sawCall, sawResult bool
		ids := map[string]bool{}
		for _, ev := range evs[1:] {
			id := eventID(ev)
			require.Contains(t, id, ":", "every event carries the native id")
			require.False(t, ids[id], "ids are unique")
			ids[id] = true
			if e, ok := ev.(*a2a.TaskStatusUpdateEvent); ok && e.Status.Message != nil {
				for _, p := range e.Status.Message.Parts {
					if dp, ok := p.(a2a.DataPart); ok {
						_, call := dp.Data["tool_call"]
						_, res := dp.Data["tool_result"]
						sawCall, sawResult = sawCall || call, sawResult || res
					}
				}
			}
		}
		require.True(t, sawCall && sawResult, "tool call and result as data parts")
		require.Equal(t, []a2a.TaskState{a2a.TaskStateCompleted}, finalStates(evs))
		last, ok := evs[len(evs)-1].(*a2a.TaskStatusUpdateEvent)
		require.True(t, ok && last.Final, "the final status-update ends the stream")
		chunk, ok := evs[len(evs)-2].(*a2a.TaskArtifactUpdateEvent)
		require.True(t, ok && chunk.LastChunk, "the last artifact chunk comes before the final status")
		want := demo.Output(text, demo.Knobs{Tokens: 12})
		require.Equal(t, want, streamedText(evs))
		require.Equal(t, want, streamedText(evs[:len(evs)-2]), "the deltas alone add up to the output")
	})

	t.Run("ResubscribeAfterCut", func(t *testing.T) {
		text := "cut me off in the middle"
		knobs := map[string]any{"demo": map[string]any{"tokens": 30, "duration_ms": 1500}}
		sctx, cut := context.WithCancel(ctx)
		head := collect(t, c.SendStreamingMessage(sctx, &a2a.MessageSendParams{Message: a2aMessage(text, knobs)}),
			func(evs []a2a.Event) bool { return len(evs) == 6 })
		cut()
		require.Len(t, head, 6)
		task := head[0].(*a2a.Task)
		rest := collect(t, c.ResubscribeToTask(withLastEventID(ctx, eventID(head[5])), &a2a.TaskIDParams{ID: task.ID}), nil)
		require.NotEmpty(t, rest)
		_, isTask := rest[0].(*a2a.Task)
		require.False(t, isTask, "a resume with Last-Event-ID continues after it, without a snapshot")
		// The whole turn from its start, for comparison: every event exactly once, in order.
		full := collect(t, c.ResubscribeToTask(withLastEventID(ctx, "0"), &a2a.TaskIDParams{ID: task.ID}), nil)
		var got, want []string
		for _, ev := range append(head[1:], rest...) {
			got = append(got, eventID(ev))
		}
		for _, ev := range full {
			want = append(want, eventID(ev))
		}
		require.Equal(t, want, got)
		require.Equal(t, demo.Output(text, demo.Knobs{Tokens: 30}), streamedText(append(head, rest...)))
		require.Equal(t, []a2a.TaskState{a2a.TaskStateCompleted}, finalStates(rest))
		// A resume from within the completion's two events gets only the second.
		chunk := full[len(full)-2]
		tail := collect(t, c.ResubscribeToTask(withLastEventID(ctx, eventID(chunk)), &a2a.TaskIDParams{ID: task.ID}), nil)
		require.Len(t, tail, 1)
		require.Equal(t, eventID(full[len(full)-1]), eventID(tail[0]))
		// Without Last-Event-ID a finished task has nothing more to stream.
		for _, err := range c.ResubscribeToTask(ctx, &a2a.TaskIDParams{ID: task.ID}) {
			require.ErrorIs(t, err, a2a.ErrUnsupportedOperation)
			break
		}
	})

	t.Run("Cancel", func(t *testing.T) {
		long := map[string]any{"demo": map[string]any{"tokens": 40, "duration_ms": 20000}}
		running := taskResult(t)(c.SendMessage(ctx, &a2a.MessageSendParams{
			Message: a2aMessage("run long", long), Config: &a2a.MessageSendConfig{Blocking: ptr(false)},
		}))
		queuedMsg := a2aMessage("wait behind it", nil)
		queuedMsg.ContextID = running.ContextID
		queued := taskResult(t)(c.SendMessage(ctx, &a2a.MessageSendParams{Message: queuedMsg, Config: &a2a.MessageSendConfig{Blocking: ptr(false)}}))
		// Wait until the first runs (its stream says working).
		collect(t, c.ResubscribeToTask(ctx, &a2a.TaskIDParams{ID: running.ID}), func(evs []a2a.Event) bool {
			_, ok := evs[len(evs)-1].(*a2a.TaskArtifactUpdateEvent)
			return ok
		})
		got, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: queued.ID})
		require.NoError(t, err)
		require.Equal(t, a2a.TaskStateSubmitted, got.Status.State, "the second waits behind the first")
		// The queued task first: once the running one is cancelled, the queued one starts, and the
		// demo agent answers it within milliseconds.
		cancelled, err := c.CancelTask(ctx, &a2a.TaskIDParams{ID: queued.ID})
		require.NoError(t, err)
		require.Equal(t, a2a.TaskStateCanceled, cancelled.Status.State, "a queued task is cancelled")
		cancelled, err = c.CancelTask(ctx, &a2a.TaskIDParams{ID: running.ID})
		require.NoError(t, err)
		require.Equal(t, a2a.TaskStateCanceled, cancelled.Status.State, "a running task is cancelled")
		_, err = c.CancelTask(ctx, &a2a.TaskIDParams{ID: queued.ID})
		require.ErrorIs(t, err, a2a.ErrTaskNotCancelable)
	})

	t.Run("InputRequiredThenFollowUp", func(t *testing.T) {
		ask := map[string]any{"demo": map[string]any{"end_state": "input-required", "tokens": 5}}
		task := taskResult(t)(c.SendMessage(ctx, &a2a.MessageSendParams{Message: a2aMessage("book a table", ask)}))
		require.Equal(t, a2a.TaskStateInputRequired, task.Status.State)
		require.NotNil(t, task.Status.Message, "the agent's question is the status message")
		follow := a2aMessage("for two, at eight", nil)
		follow.TaskID, follow.ContextID = task.ID, task.ContextID
		evs := collect(t, c.SendStreamingMessage(ctx, &a2a.MessageSendParams{Message: follow}), nil)
		require.Equal(t, task.ID, evs[0].(*a2a.Task).ID, "the follow-up runs as the same task")
		require.Equal(t, []a2a.TaskState{a2a.TaskStateCompleted}, finalStates(evs))
		got, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID})
		require.NoError(t, err)
		require.Equal(t, a2a.TaskStateCompleted, got.Status.State)
		require.Len(t, got.Artifacts, 2, "one response per turn")
		require.Len(t, got.History, 4)
		require.Equal(t, "book a table", got.History[0].Parts[0].(a2a.TextPart).Text)
		require.Equal(t, "for two, at eight", got.History[2].Parts[0].(a2a.TextPart).Text)
		// The native view: one session, two turns, in order.
		var page struct {
			Turns []struct {
				TurnID string `json:"turn_id"`
				Status string `json:"status"`
			} `json:"turns"`
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/v1/sessions/"+task.ContextID+"/turns", nil)
		req.Header.Set("Authorization", "Bearer "+s.keyA)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&page))
		resp.Body.Close()
		require.Len(t, page.Turns, 2)
		require.Equal(t, string(task.ID), page.Turns[1].TurnID, "newest first: the task's own turn is the older")
		// A finished task takes no more messages; a contextId that is not the task's is refused.
		again := a2aMessage("one more", nil)
		again.TaskID = task.ID
		_, err = c.SendMessage(ctx, &a2a.MessageSendParams{Message: again})
		require.ErrorIs(t, err, a2a.ErrUnsupportedOperation)
		wrong := a2aMessage("elsewhere", nil)
		wrong.TaskID, wrong.ContextID = task.ID, "another-context"
		_, err = c.SendMessage(ctx, &a2a.MessageSendParams{Message: wrong})
		require.ErrorIs(t, err, a2a.ErrInvalidParams)
	})

	t.Run("SameMessageFiveTimes", func(t *testing.T) {
		m := a2aMessage("only once please", map[string]any{"demo": map[string]any{"duration_ms": 300}})
		m.ContextID = "five-" + testenv.RandomHex(4)
		ids := make([]a2a.TaskID, 5)
		var wg sync.WaitGroup
		for i := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := c.SendMessage(ctx, &a2a.MessageSendParams{Message: m})
				if err == nil {
					ids[i] = r.(*a2a.Task).ID
				}
			}()
		}
		wg.Wait()
		for _, id := range ids {
			require.Equal(t, ids[0], id, "every send answers the same task")
		}
		var page struct {
			Turns []struct {
				Attempts int    `json:"attempts"`
				Status   string `json:"status"`
			} `json:"turns"`
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/v1/sessions/"+m.ContextID+"/turns", nil)
		req.Header.Set("Authorization", "Bearer "+s.keyA)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&page))
		resp.Body.Close()
		require.Len(t, page.Turns, 1, "one turn")
		require.Equal(t, 1, page.Turns[0].Attempts, "the agent ran once")
		require.Equal(t, "succeeded", page.Turns[0].Status)
		h := history(t, s.env, wire.NewSessionKey("acme", m.ContextID).String())
		require.Len(t, h, 2, "one question and one answer in the session history")
	})

	t.Run("CrossTenant", func(t *testing.T) {
		task := taskResult(t)(c.SendMessage(ctx, &a2a.MessageSendParams{Message: a2aMessage("mine", nil)}))
		other := s.client(t, s.keyB, nil)
		_, err := other.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID})
		require.ErrorIs(t, err, a2a.ErrTaskNotFound)
		_, err = other.CancelTask(ctx, &a2a.TaskIDParams{ID: task.ID})
		require.ErrorIs(t, err, a2a.ErrTaskNotFound)
		for _, err := range other.ResubscribeToTask(withLastEventID(ctx, "0"), &a2a.TaskIDParams{ID: task.ID}) {
			require.ErrorIs(t, err, a2a.ErrTaskNotFound)
			break
		}
		follow := a2aMessage("hijack", nil)
		follow.TaskID = task.ID
		_, err = other.SendMessage(ctx, &a2a.MessageSendParams{Message: follow})
		require.ErrorIs(t, err, a2a.ErrTaskNotFound)
	})

	t.Run("BadInput", func(t *testing.T) {
		before := topicEnd(t, s.env)
		// Through the official client: what it can send wrong.
		file := a2a.NewMessage(a2a.MessageRoleUser, a2a.FilePart{File: a2a.FileURI{URI: "https://example.com/a.png"}})
		_, err := c.SendMessage(ctx, &a2a.MessageSendParams{Message: file})
		require.ErrorIs(t, err, a2a.ErrUnsupportedContentType)
		_, err = c.SendMessage(ctx, &a2a.MessageSendParams{Message: a2aMessage("png only", nil), Config: &a2a.MessageSendConfig{AcceptedOutputModes: []string{"image/png"}}})
		require.ErrorIs(t, err, a2a.ErrUnsupportedContentType)
		empty := a2a.NewMessage(a2a.MessageRoleUser)
		_, err = c.SendMessage(ctx, &a2a.MessageSendParams{Message: empty})
		require.ErrorIs(t, err, a2a.ErrInvalidParams)
		_, err = c.SendMessage(ctx, &a2a.MessageSendParams{Message: a2aMessage("   ", nil)})
		require.ErrorIs(t, err, a2a.ErrInvalidParams)
		agentSays := a2a.NewMessage(a2a.MessageRoleAgent, a2a.TextPart{Text: "I am the agent"})
		_, err = c.SendMessage(ctx, &a2a.MessageSendParams{Message: agentSays})
		require.ErrorIs(t, err, a2a.ErrInvalidParams)
		_, err = c.GetTask(ctx, &a2a.TaskQueryParams{ID: "not-a-task"})
		require.ErrorIs(t, err, a2a.ErrTaskNotFound)
		_, err = c.GetTask(ctx, &a2a.TaskQueryParams{ID: "0190b7a4-0000-7000-8000-000000000000"})
		require.ErrorIs(t, err, a2a.ErrTaskNotFound)
		_, err = c.GetTask(ctx, &a2a.TaskQueryParams{ID: "0190b7a4-0000-7000-8000-000000000000", HistoryLength: ptr(-1)})
		require.ErrorIs(t, err, a2a.ErrInvalidParams)
		_, err = c.SetTaskPushConfig(ctx, &a2a.TaskPushConfig{TaskID: "x", Config: a2a.PushConfig{URL: "https://example.com/hook"}})
		require.ErrorIs(t, err, a2a.ErrTaskNotFound, "push configs belong to tasks that exist")
		versioned := s.client(t, s.keyA, map[string]string{"A2A-Version": "2.0"})
		_, err = versioned.GetTask(ctx, &a2a.TaskQueryParams{ID: "0190b7a4-0000-7000-8000-000000000000"})
		require.Error(t, err)
		require.Contains(t, err.Error(), "version", "an A2A-Version this server does not speak")

		// What no well-behaved client sends: the exact JSON-RPC codes.
		for _, tc := range []struct {
			name, body string
			code       int
		}{
			{"NotJSON", `{"jsonrpc":`, -32700},
			{"NotJSONRPC2", `{"jsonrpc":"1.0","id":1,"method":"tasks/get","params":{"id":"x"}}`, -32600},
			{"NoMethod", `{"jsonrpc":"2.0","id":1}`, -32600},
			{"ObjectID", `{"jsonrpc":"2.0","id":{},"method":"tasks/get","params":{"id":"x"}}`, -32600},
			{"UnknownMethod", `{"jsonrpc":"2.0","id":1,"method":"tasks/explode","params":{}}`, -32601},
			{"ParamsNotObject", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":"hello"}`, -32602},
			{"NoMessage", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{}}`, -32602},
			{"NoMessageID", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"role":"user","parts":[{"kind":"text","text":"hi"}]}}}`, -32602},
			{"UnknownPartKind", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"messageId":"m","role":"user","parts":[{"kind":"video"}]}}}`, -32602},
			{"StreamNoParams", `{"jsonrpc":"2.0","id":1,"method":"message/stream"}`, -32602},
			{"GetNoID", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{}}`, -32602},
			{"CancelUnknown", `{"jsonrpc":"2.0","id":1,"method":"tasks/cancel","params":{"id":"0190b7a4-0000-7000-8000-000000000000"}}`, -32001},
			{"V1NameUnknownTask", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"0190b7a4-0000-7000-8000-000000000000"}}`, -32001},
			{"BadContextID", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"messageId":"m1","contextId":"has spaces","role":"user","parts":[{"kind":"text","text":"hi"}]}}}`, -32602},
		} {
			t.Run(tc.name, func(t *testing.T) {
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.base+"/a2a", bytes.NewBufferString(tc.body))
				req.Header.Set("Authorization", "Bearer "+s.keyA)
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				require.NoError(t, err)
				defer resp.Body.Close()
				var out struct {
					Error *struct {
						Code int `json:"code"`
					} `json:"error"`
				}
				require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
				require.NotNil(t, out.Error)
				require.Equal(t, tc.code, out.Error.Code)
			})
		}
		versionReq, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.base+"/a2a",
			bytes.NewBufferString(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"x"}}`))
		versionReq.Header.Set("A2A-Version", "0.5")
		versionReq.Header.Set("Authorization", "Bearer "+s.keyA)
		resp, err := http.DefaultClient.Do(versionReq)
		require.NoError(t, err)
		var out struct {
			Error struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		resp.Body.Close()
		require.Equal(t, -32009, out.Error.Code, "VersionNotSupportedError")
		require.Equal(t, before, topicEnd(t, s.env), "nothing bad was produced to Kafka")
	})

	// Last: a drained replica ends its streams (the client resubscribes elsewhere) and takes no new
	// ones, while the task runs on.
	t.Run("DrainEndsStreams", func(t *testing.T) {
		srv := s.stack.Component("a2a").(*a2asrv.Server)
		long := map[string]any{"demo": map[string]any{"tokens": 20, "duration_ms": 1000}}
		var evs []a2a.Event
		drained := false
		for ev, err := range c.SendStreamingMessage(ctx, &a2a.MessageSendParams{Message: a2aMessage("drain me", long)}) {
			require.NoError(t, err)
			evs = append(evs, ev)
			if _, ok := ev.(*a2a.TaskArtifactUpdateEvent); ok && !drained {
				require.Equal(t, 1, srv.Streams())
				srv.Drain(ctx)
				drained = true
			}
		}
		require.True(t, drained)
		require.Empty(t, finalStates(evs), "the stream ended before the task did")
		require.Equal(t, 0, srv.Streams())
		require.Error(t, srv.Ready(), "a draining replica is not ready")
		task := evs[0].(*a2a.Task)
		testenv.WaitFor(t, 30*time.Second, "the task to complete", func() bool {
			got, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID})
			require.NoError(t, err)
			return got.Status.State == a2a.TaskStateCompleted
		})
	})

	t.Run("Unauthenticated", func(t *testing.T) {
		anon := s.client(t, "", nil)
		_, err := anon.SendMessage(ctx, &a2a.MessageSendParams{Message: a2aMessage("who am I", nil)})
		require.Error(t, err)
		require.Contains(t, err.Error(), "401")
	})

	// Last, as the held-back records land once released: when Kafka does not acknowledge in time,
	// sends and streams are answered 503 with Retry-After before anything is streamed.
	t.Run("KafkaSlowIsRetryable", func(t *testing.T) {
		cluster := s.env.KfakeCluster()
		require.NotNil(t, cluster, "needs the embedded broker")
		release := make(chan struct{})
		defer close(release)
		cluster.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
			cluster.SleepControl(func() { <-release })
			return nil, nil, false
		})
		for _, method := range []string{"message/send", "message/stream"} {
			body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":{"message":{"messageId":"slow-` + method +
				`","role":"user","parts":[{"kind":"text","text":"is Kafka there?"}]}}}`
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.base+"/a2a", bytes.NewBufferString(body))
			req.Header.Set("Authorization", "Bearer "+s.keyA)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			var out struct {
				Error struct {
					Code int `json:"code"`
				} `json:"error"`
			}
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&out), method)
			resp.Body.Close()
			require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, method)
			require.NotEmpty(t, resp.Header.Get("Retry-After"), method)
			require.Equal(t, "application/json", resp.Header.Get("Content-Type"), method)
			require.Equal(t, -32000, out.Error.Code, method)
		}
	})
}

// TestA2AWorkerKilledMidTask SIGKILLs the worker process running a task while an a2a-go client
// streams it: the stream goes on with the retried attempt (its artifact restarts), and the task
// completes once.
func TestA2AWorkerKilledMidTask(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOptions{
		Partitions: 2, LeaseTTL: 1500 * time.Millisecond, Heartbeat: 300 * time.Millisecond,
		FrontRoles: "broker,intake,gateway,a2a",
	})
	c.startWorker("w1")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	client, err := a2aclient.NewFromEndpoints(ctx, []a2a.AgentInterface{{URL: c.base + "/a2a", Transport: a2a.TransportProtocolJSONRPC}})
	require.NoError(t, err)
	defer func() { _ = client.Destroy() }()

	text := "survive the crash"
	knobs := demo.Knobs{Tokens: 40, DurationMs: 4000}
	msg := a2aMessage(text, map[string]any{"demo": map[string]any{"tokens": knobs.Tokens, "duration_ms": knobs.DurationMs}})
	var (
		evs    []a2a.Event
		killed bool
	)
	for ev, err := range client.SendStreamingMessage(ctx, &a2a.MessageSendParams{Message: msg}) {
		require.NoError(t, err)
		evs = append(evs, ev)
		if e, ok := ev.(*a2a.TaskArtifactUpdateEvent); ok && !killed && e.Append {
			// A few words in: the worker dies, another one takes the turn over.
			if n := len(evs); n > 8 {
				c.kill("w1")
				c.startWorker("w2")
				killed = true
			}
		}
	}
	require.True(t, killed)
	require.Equal(t, []a2a.TaskState{a2a.TaskStateCompleted}, finalStates(evs), "the task completes once")
	var retried, restarted bool
	for _, ev := range evs {
		switch e := ev.(type) {
		case *a2a.TaskStatusUpdateEvent:
			if r, _ := e.Metadata["turnstile/retrying"].(bool); r {
				retried = true
			}
		case *a2a.TaskArtifactUpdateEvent:
			if retried && !e.Append && !e.LastChunk {
				restarted = true
			}
		}
	}
	require.True(t, retried, "the stream shows the retry")
	require.True(t, restarted, "the artifact restarts with the retried attempt")
	require.Equal(t, demo.Output(text, knobs), streamedText(evs))
	task := evs[0].(*a2a.Task)
	r := c.turn(string(task.ID))
	require.Equal(t, "succeeded", r.Status)
	require.Equal(t, 2, r.Attempt)
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatal("timed out")
	}
}
