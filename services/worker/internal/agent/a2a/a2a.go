package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	sdk "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"

	"github.com/turnstile-run/turnstile/services/worker/internal/agent"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/pool"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/upstream"
)

// HistoryKey is the message metadata key carrying the session history.
const HistoryKey = "turnstile/history"

// DeadlineHeader carries the turn's absolute deadline (Unix milliseconds) on every request, in
// the convention turnstile's own intake reads, so a remote agent that is itself a turnstile (or
// any agent that honours it) shares the turn's deadline instead of starting its own.
const DeadlineHeader = "X-Deadline-Epoch-Ms"

// RouteKeyHeader carries every request's route key (see pool.RouteKey), so an L7 proxy in front
// of the replicas can hash on it.
const RouteKeyHeader = "x-a2a-route-key"

// Config configures the agent.
type Config struct {
	// URL is the remote agent's JSON-RPC endpoint; required unless Guard balances over a pool,
	// whose endpoints are then the replicas' JSON-RPC endpoints.
	URL string
	// HeaderTimeout bounds the wait for an answer's headers. Defaults to 30s.
	HeaderTimeout time.Duration
	// CancelTimeout bounds the forwarded tasks/cancel call. Defaults to 5s.
	CancelTimeout time.Duration
	// Transport is the HTTP transport under the SDK. Defaults to one with HeaderTimeout.
	Transport http.RoundTripper
	// Guard protects the upstream. Defaults to upstream.New with the default settings.
	Guard *upstream.Guard
}

// Agent is the A2A agent.
type Agent struct {
	cfg Config
	hc  *http.Client

	mu      sync.Mutex
	clients map[string]*a2aclient.Client // by endpoint URL
}

// New returns an agent for the remote agent at cfg.URL.
func New(ctx context.Context, cfg Config) (*Agent, error) {
	if cfg.URL == "" && (cfg.Guard == nil || !cfg.Guard.Balanced()) {
		return nil, errors.New("a2a agent: URL is required")
	}
	if cfg.HeaderTimeout <= 0 {
		cfg.HeaderTimeout = 30 * time.Second
	}
	if cfg.CancelTimeout <= 0 {
		cfg.CancelTimeout = 5 * time.Second
	}
	if cfg.Transport == nil {
		cfg.Transport = upstream.NewTransport(cfg.HeaderTimeout)
	}
	if cfg.Guard == nil {
		cfg.Guard = upstream.New(upstream.Config{Name: cfg.URL})
	}
	a := &Agent{cfg: cfg, hc: &http.Client{Transport: statusTransport{next: cfg.Transport}}, clients: map[string]*a2aclient.Client{}}
	if cfg.URL != "" {
		if _, err := a.client(ctx, cfg.URL); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// client returns the SDK client of one endpoint, made on first use.
func (a *Agent) client(ctx context.Context, url string) (*a2aclient.Client, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if c, ok := a.clients[url]; ok {
		return c, nil
	}
	c, err := a2aclient.NewFromEndpoints(ctx,
		[]sdk.AgentInterface{{URL: url, Transport: sdk.TransportProtocolJSONRPC}},
		a2aclient.WithJSONRPCTransport(a.hc))
	if err != nil {
		return nil, fmt.Errorf("a2a agent: create client of %s: %w", url, err)
	}
	a.clients[url] = c
	return c, nil
}

// Guard returns the agent's upstream guard.
func (a *Agent) Guard() *upstream.Guard { return a.cfg.Guard }

// Close releases the clients.
func (a *Agent) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	var errs []error
	for _, c := range a.clients {
		errs = append(errs, c.Destroy())
	}
	return errors.Join(errs...)
}

type routeKeyCtx struct{}

// statusTransport publishes the route key the request's context carries and turns error answers
// into upstream.StatusError (named by the endpoint), which the SDK wraps with %w.
type statusTransport struct {
	next http.RoundTripper
}

func (t statusTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	key, _ := req.Context().Value(routeKeyCtx{}).(string)
	deadline, hasDeadline := req.Context().Deadline()
	if key != "" || hasDeadline {
		req = req.Clone(req.Context())
		if key != "" {
			req.Header.Set(RouteKeyHeader, key)
		}
		if hasDeadline {
			req.Header.Set(DeadlineHeader, strconv.FormatInt(deadline.UnixMilli(), 10))
		}
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.StatusCode < 400 {
		return resp, err
	}
	defer func() { _ = resp.Body.Close() }()
	return nil, upstream.NewStatusError(req.URL.Scheme+"://"+req.URL.Host+req.URL.Path, resp, time.Now())
}

// Run answers the turn.
func (a *Agent) Run(ctx context.Context, turn agent.Turn, history []agent.Message, sink agent.Sink) (agent.Result, error) {
	hist := make([]map[string]any, len(history))
	for i, m := range history {
		hist[i] = map[string]any{"seq": m.Seq, "turn_id": m.TurnID, "role": m.Role, "content": m.Content}
	}
	ctx = context.WithValue(ctx, routeKeyCtx{}, pool.RouteKey(turn))
	var res agent.Result
	err := a.cfg.Guard.Do(ctx, turn, sink, func(ctx context.Context, c *upstream.Call) error {
		// The turn's own metadata goes along as the message's; turnstile's keys are namespaced so
		// they cannot collide with it.
		meta := make(map[string]any, len(turn.Metadata)+2)
		for k, v := range turn.Metadata {
			meta[k] = v
		}
		meta[HistoryKey], meta["turnstile/attempt"] = hist, turn.Attempt
		msg := &sdk.Message{
			ID: turn.TurnID, ContextID: turn.SessionID, Role: sdk.MessageRoleUser,
			Parts:    sdk.ContentParts{sdk.TextPart{Text: turn.Text}},
			Metadata: meta,
		}
		var err error
		res, err = a.stream(ctx, c, msg, sink)
		return err
	})
	return res, err
}

// endpoint is where the call's request goes: the pool's pick, else the configured URL.
func (a *Agent) endpoint(c *upstream.Call) string {
	if c.Target != nil {
		return c.Target.Address()
	}
	return a.cfg.URL
}

// notFound counts an answer "task not found" against the endpoint that gave it.
func notFound(c *upstream.Call, err error) {
	if ep, ok := c.Target.(*pool.Endpoint); ok && errors.Is(err, sdk.ErrTaskNotFound) {
		ep.TaskNotFound()
	}
}

func (a *Agent) stream(ctx context.Context, c *upstream.Call, msg *sdk.Message, sink agent.Sink) (agent.Result, error) {
	name := a.endpoint(c)
	client, err := a.client(ctx, name)
	if err != nil {
		return agent.Result{}, err
	}
	var (
		taskID   sdk.TaskID
		out      strings.Builder
		final    []string
		finished bool
		state    string
		// streamed is the text emitted so far of each artifact, so that an update replacing an
		// artifact (append false, e.g. the full text at the end) adds only what is new.
		streamed = map[sdk.ArtifactID]string{}
	)
	emit := func(parts sdk.ContentParts) error {
		for _, p := range parts {
			if err := a.part(ctx, c, p, sink, &out); err != nil {
				return err
			}
		}
		return nil
	}
	err = func() error {
		for ev, err := range client.SendStreamingMessage(ctx, &sdk.MessageSendParams{Message: msg}) {
			if err != nil {
				notFound(c, err)
				return fmt.Errorf("a2a message/stream: %w", err)
			}
			c.Responded()
			switch e := ev.(type) {
			case *sdk.Message:
				if err := emit(e.Parts); err != nil {
					return err
				}
				finished = true
				return nil
			case *sdk.Task:
				taskID = e.ID
				for _, art := range e.Artifacts {
					final = append(final, texts(art.Parts)...)
				}
				if e.Status.State.Terminal() || interrupted(e.Status.State) {
					return a.terminal(name, e.Status, &final, &finished, &state)
				}
			case *sdk.TaskArtifactUpdateEvent:
				taskID = e.TaskID
				if err := emit(newParts(e, streamed)); err != nil {
					return err
				}
			case *sdk.TaskStatusUpdateEvent:
				taskID = e.TaskID
				if e.Status.State == sdk.TaskStateWorking && e.Status.Message != nil {
					if err := emit(e.Status.Message.Parts); err != nil {
						return err
					}
				}
				if e.Final || e.Status.State.Terminal() || interrupted(e.Status.State) {
					return a.terminal(name, e.Status, &final, &finished, &state)
				}
			}
		}
		return nil
	}()
	if ctx.Err() != nil && taskID != "" && !finished {
		a.cancel(ctx, c, client, taskID)
	}
	if err != nil {
		return agent.Result{}, err
	}
	if ctx.Err() != nil {
		return agent.Result{}, context.Cause(ctx)
	}
	if !finished {
		return agent.Result{}, &upstream.StreamError{Upstream: name, Message: "stream ended before the task finished"}
	}
	if out.Len() == 0 && len(final) > 0 {
		text := strings.Join(final, "")
		c.Emitted()
		if err := sink.Delta(ctx, text); err != nil {
			return agent.Result{}, err
		}
		return agent.Result{Text: text, State: state}, nil
	}
	return agent.Result{Text: out.String(), State: state}, nil
}

// interrupted reports whether a remote task waits for its user: the turn ends with that state
// (wire.Output.State) and the session's next turn carries the answer.
func interrupted(s sdk.TaskState) bool {
	return s == sdk.TaskStateInputRequired || s == sdk.TaskStateAuthRequired
}

// cancel forwards the turn's end to the remote task, on a context of its own, through the client
// of the endpoint that runs the task (under affinity, the replica holding the session).
func (a *Agent) cancel(ctx context.Context, c *upstream.Call, client *a2aclient.Client, id sdk.TaskID) {
	cctx, stop := context.WithTimeout(context.WithoutCancel(ctx), a.cfg.CancelTimeout)
	defer stop()
	if _, err := client.CancelTask(cctx, &sdk.TaskIDParams{ID: id}); err != nil {
		notFound(c, err)
	}
}

func (a *Agent) terminal(name string, st sdk.TaskStatus, final *[]string, finished *bool, state *string) error {
	var msg string
	if st.Message != nil {
		msg = strings.Join(texts(st.Message.Parts), "")
	}
	switch st.State {
	case sdk.TaskStateCompleted, sdk.TaskStateInputRequired, sdk.TaskStateAuthRequired:
		if msg != "" {
			*final = append(*final, msg)
		}
		*finished = true
		if interrupted(st.State) {
			*state = string(st.State)
		}
		return nil
	case sdk.TaskStateFailed:
		return &upstream.StreamError{Upstream: name, Message: "task failed: " + msg}
	case sdk.TaskStateCanceled:
		return fmt.Errorf("a2a task was cancelled by the remote agent: %s", msg)
	default:
		return fmt.Errorf("a2a task ended %s: %s: %w", st.State, msg, agent.ErrPermanent)
	}
}

func (a *Agent) part(ctx context.Context, c *upstream.Call, p sdk.Part, sink agent.Sink, out *strings.Builder) error {
	switch v := p.(type) {
	case sdk.TextPart:
		if v.Text == "" {
			return nil
		}
		c.Emitted()
		if err := sink.Delta(ctx, v.Text); err != nil {
			return err
		}
		out.WriteString(v.Text)
	case sdk.DataPart:
		if raw, ok := v.Data["tool_call"]; ok {
			var d struct {
				CallID    string          `json:"call_id"`
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			}
			if err := remarshal(raw, &d); err != nil {
				return fmt.Errorf("a2a tool_call part: %w", err)
			}
			c.Emitted()
			return sink.ToolCall(ctx, agent.ToolCall{CallID: d.CallID, Name: d.Name, Arguments: d.Arguments})
		}
		if raw, ok := v.Data["tool_result"]; ok {
			var d struct {
				CallID string          `json:"call_id"`
				Result json.RawMessage `json:"result"`
				Error  string          `json:"error"`
			}
			if err := remarshal(raw, &d); err != nil {
				return fmt.Errorf("a2a tool_result part: %w", err)
			}
			c.Emitted()
			return sink.ToolResult(ctx, agent.ToolResult{CallID: d.CallID, Result: d.Result, Error: d.Error})
		}
		if raw, ok := v.Data["custom"]; ok {
			var d struct {
				Name string          `json:"name"`
				Data json.RawMessage `json:"data"`
			}
			if err := remarshal(raw, &d); err != nil {
				return fmt.Errorf("a2a custom part: %w", err)
			}
			c.Emitted()
			return agent.EmitCustom(ctx, sink, d.Name, d.Data)
		}
	}
	return nil
}

// newParts is what an artifact update adds to what was already emitted of its artifact, and
// records it. An appended chunk is new whole. A replacement of an artifact already streamed (append
// false, as an agent sends the full text with its last chunk) adds only the text beyond what was
// streamed, and nothing when it does not continue it: emitted deltas cannot be taken back, and
// repeating the whole answer would show it twice.
func newParts(e *sdk.TaskArtifactUpdateEvent, streamed map[sdk.ArtifactID]string) sdk.ContentParts {
	id := e.Artifact.ID
	text := strings.Join(texts(e.Artifact.Parts), "")
	prev, seen := streamed[id]
	if !seen || e.Append {
		streamed[id] = prev + text
		return e.Artifact.Parts
	}
	rest, continues := strings.CutPrefix(text, prev)
	if !continues || rest == "" {
		return nil
	}
	streamed[id] = text
	return sdk.ContentParts{sdk.TextPart{Text: rest}}
}

func texts(parts sdk.ContentParts) []string {
	var out []string
	for _, p := range parts {
		if t, ok := p.(sdk.TextPart); ok {
			out = append(out, t.Text)
		}
	}
	return out
}

func remarshal(v any, dst any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, dst)
}
