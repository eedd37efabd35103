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

// The protocol versions the agent speaks, by the A2A-Version each request names.
const (
	Protocol03 = "0.3"
	Protocol10 = "1.0"
)

// VersionHeader names the protocol version of a request (A2A 1.0, section 3.2.6).
const VersionHeader = "A2A-Version"

// CardTTLDefault is how long the protocol version read from an endpoint's Agent Card is kept.
const CardTTLDefault = 5 * time.Minute

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
	// CardTTL is how long the protocol version read from an endpoint's Agent Card is kept before
	// the card is read again. Defaults to CardTTLDefault.
	CardTTL time.Duration
}

// Agent is the A2A agent.
type Agent struct {
	cfg Config
	hc  *http.Client

	mu    sync.Mutex
	conns map[string]*endpointConn // by endpoint URL
}

// endpointConn is an endpoint's conn and until when its protocol version is taken as known (both
// guarded by Agent.mu); reading holds the one card read of the endpoint in flight, so the turns
// that start together on a new endpoint wait for one read rather than each making its own.
type endpointConn struct {
	reading chan struct{}
	conn    conn
	until   time.Time
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
	if cfg.CardTTL <= 0 {
		cfg.CardTTL = CardTTLDefault
	}
	if cfg.URL != "" {
		if _, err := CardURL(cfg.URL); err != nil {
			return nil, fmt.Errorf("a2a agent: %w", err)
		}
	}
	_ = ctx // the endpoints are dialled on first use, so an agent that is down at start is not an error
	return &Agent{cfg: cfg, hc: &http.Client{Transport: statusTransport{next: cfg.Transport}}, conns: map[string]*endpointConn{}}, nil
}

// conn returns the conn of one endpoint: protocol 1.0 when the endpoint's Agent Card offers 1.0
// over JSON-RPC, else 0.3. The card is read on first use and again once CardTTL has passed, so an
// agent that moves to 1.0 (or back) is followed; while a card cannot be read again, the version
// known is kept.
func (a *Agent) conn(ctx context.Context, endpoint string) (conn, error) {
	a.mu.Lock()
	e, ok := a.conns[endpoint]
	if !ok {
		e = &endpointConn{reading: make(chan struct{}, 1)}
		a.conns[endpoint] = e
	}
	known, until := e.conn, e.until
	a.mu.Unlock()
	if known != nil && time.Now().Before(until) {
		return known, nil
	}
	select {
	case e.reading <- struct{}{}:
		defer func() { <-e.reading }()
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	a.mu.Lock()
	known, until = e.conn, e.until
	a.mu.Unlock()
	now := time.Now()
	if known != nil && now.Before(until) {
		// Another turn read the card meanwhile.
		return known, nil
	}
	version, err := a.protocolOf(ctx, endpoint)
	var se *upstream.StatusError
	switch {
	case err != nil && known != nil:
		return known, nil
	case errors.As(err, &se):
		// The card is refused for now (429, 5xx) while the endpoint may well answer: in a pool's
		// panic mode, say, whose probes read the same card. The request goes in 0.3, as a
		// request naming no version is read, and the card is read again next time.
		version, now = Protocol03, now.Add(-a.cfg.CardTTL)
	case err != nil:
		return nil, fmt.Errorf("a2a agent: %w", err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if known != nil && known.protocol() == version {
		e.until = now.Add(a.cfg.CardTTL)
		return known, nil
	}
	var c conn = &v1Conn{url: endpoint, hc: a.hc}
	if version == Protocol03 {
		sc, err := a2aclient.NewFromEndpoints(ctx,
			[]sdk.AgentInterface{{URL: endpoint, Transport: sdk.TransportProtocolJSONRPC}},
			a2aclient.WithJSONRPCTransport(a.hc))
		if err != nil {
			return nil, fmt.Errorf("a2a agent: create client of %s: %w", endpoint, err)
		}
		c = v03Conn{c: sc}
	}
	// A conn replaced by another version's is left to its streams still open; it holds no
	// connections of its own (the HTTP client is the agent's).
	e.conn, e.until = c, now.Add(a.cfg.CardTTL)
	return c, nil
}

// protocolOf reads the Agent Card at the endpoint's origin and says which version to speak. No
// card (an answer other than 200 or a 429/5xx, a body that is not a card) is an agent of 0.3,
// which did not require one at a fixed place; a card that cannot be fetched now (unreachable, a
// 429 or 5xx: an *upstream.StatusError) is an error.
func (a *Agent) protocolOf(ctx context.Context, endpoint string) (string, error) {
	cardURL, err := CardURL(endpoint)
	if err != nil {
		return "", err
	}
	card, err := readCard(ctx, a.hc, cardURL)
	var se *upstream.StatusError
	switch {
	case err == nil:
		if _, ok := card.v1JSONRPC(); ok {
			return Protocol10, nil
		}
		return Protocol03, nil
	case errors.As(err, &se):
		if se.Status == http.StatusTooManyRequests || se.Status >= 500 {
			return "", err
		}
		return Protocol03, nil
	case errors.Is(err, errNotACard):
		return Protocol03, nil
	}
	return "", err
}

// Protocol is the version the agent speaks to endpoint, as last read from its card ("" before
// the first request).
func (a *Agent) Protocol(endpoint string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if e, ok := a.conns[endpoint]; ok && e.conn != nil {
		return e.conn.protocol()
	}
	return ""
}

// Guard returns the agent's upstream guard.
func (a *Agent) Guard() *upstream.Guard { return a.cfg.Guard }

// Close releases the clients.
func (a *Agent) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	var errs []error
	for _, c := range a.conns {
		if c.conn != nil {
			errs = append(errs, c.conn.close())
		}
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
	// []any, not []map[string]any: the metadata must also be a proto Struct (protocol 1.0).
	hist := make([]any, len(history))
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
	client, err := a.conn(ctx, name)
	if err != nil {
		return agent.Result{}, err
	}
	var (
		taskID   sdk.TaskID
		out      strings.Builder
		final    []string
		finished bool
		state    string
		// usage is the last usage the remote agent reported in event metadata (UsageKey).
		usage *agent.Usage
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
		for ev, err := range client.stream(ctx, &sdk.MessageSendParams{Message: msg}) {
			if err != nil {
				notFound(c, err)
				return fmt.Errorf("a2a %s stream: %w", client.protocol(), err)
			}
			c.Responded()
			if u := usageIn(ev); u != nil {
				usage = u
			}
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
		return agent.Result{Text: text, State: state, Usage: usage}, nil
	}
	return agent.Result{Text: out.String(), State: state, Usage: usage}, nil
}

// UsageKey is the metadata key under which a remote agent may report the task's token usage, on
// the task, a status or artifact update, its status message, or a message answer:
// {"input_tokens", "output_tokens", "total_tokens" (their sum when absent), "model"}, the fields of
// the http agent protocol's usage event. Each report is the task's usage so far: the last one is
// the turn's.
const UsageKey = "usage"

// usageIn is the usage an event's metadata reports, nil for none or one that is not an object of
// non-negative counts.
func usageIn(ev sdk.Event) *agent.Usage {
	var mds []map[string]any
	switch e := ev.(type) {
	case *sdk.Message:
		mds = append(mds, e.Metadata)
	case *sdk.Task:
		mds = append(mds, e.Metadata)
		if e.Status.Message != nil {
			mds = append(mds, e.Status.Message.Metadata)
		}
	case *sdk.TaskStatusUpdateEvent:
		mds = append(mds, e.Metadata)
		if e.Status.Message != nil {
			mds = append(mds, e.Status.Message.Metadata)
		}
	case *sdk.TaskArtifactUpdateEvent:
		mds = append(mds, e.Metadata)
	}
	var out *agent.Usage
	for _, md := range mds {
		raw, ok := md[UsageKey]
		if !ok {
			continue
		}
		var u struct {
			InputTokens  int64  `json:"input_tokens"`
			OutputTokens int64  `json:"output_tokens"`
			TotalTokens  int64  `json:"total_tokens"`
			Model        string `json:"model"`
		}
		if remarshal(raw, &u) != nil || u.InputTokens < 0 || u.OutputTokens < 0 || u.TotalTokens < 0 {
			continue
		}
		if u.TotalTokens == 0 {
			u.TotalTokens = u.InputTokens + u.OutputTokens
		}
		out = &agent.Usage{PromptTokens: u.InputTokens, CompletionTokens: u.OutputTokens, TotalTokens: u.TotalTokens, Model: u.Model}
	}
	return out
}

// interrupted reports whether a remote task waits for its user: the turn ends with that state
// (wire.Output.State) and the session's next turn carries the answer.
func interrupted(s sdk.TaskState) bool {
	return s == sdk.TaskStateInputRequired || s == sdk.TaskStateAuthRequired
}

// cancel forwards the turn's end to the remote task, on a context of its own, through the client
// of the endpoint that runs the task (under affinity, the replica holding the session).
func (a *Agent) cancel(ctx context.Context, c *upstream.Call, client conn, id sdk.TaskID) {
	cctx, stop := context.WithTimeout(context.WithoutCancel(ctx), a.cfg.CancelTimeout)
	defer stop()
	if err := client.cancel(cctx, id); err != nil {
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
