package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	sdk "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"

	"github.com/turnstile-run/turnstile/services/worker/internal/agent"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/upstream"
)

// HistoryKey is the message metadata key carrying the session history.
const HistoryKey = "turnstile/history"

// Config configures the agent.
type Config struct {
	// URL is the remote agent's JSON-RPC endpoint.
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
	cfg    Config
	client *a2aclient.Client
}

// New returns an agent for the remote agent at cfg.URL.
func New(ctx context.Context, cfg Config) (*Agent, error) {
	if cfg.URL == "" {
		return nil, errors.New("a2a agent: URL is required")
	}
	if cfg.HeaderTimeout <= 0 {
		cfg.HeaderTimeout = 30 * time.Second
	}
	if cfg.CancelTimeout <= 0 {
		cfg.CancelTimeout = 5 * time.Second
	}
	if cfg.Transport == nil {
		cfg.Transport = &http.Transport{ResponseHeaderTimeout: cfg.HeaderTimeout}
	}
	if cfg.Guard == nil {
		cfg.Guard = upstream.New(upstream.Config{Name: cfg.URL})
	}
	hc := &http.Client{Transport: statusTransport{name: cfg.URL, next: cfg.Transport}}
	client, err := a2aclient.NewFromEndpoints(ctx,
		[]sdk.AgentInterface{{URL: cfg.URL, Transport: sdk.TransportProtocolJSONRPC}},
		a2aclient.WithJSONRPCTransport(hc))
	if err != nil {
		return nil, fmt.Errorf("a2a agent: create client: %w", err)
	}
	return &Agent{cfg: cfg, client: client}, nil
}

// Guard returns the agent's upstream guard.
func (a *Agent) Guard() *upstream.Guard { return a.cfg.Guard }

// Close releases the client.
func (a *Agent) Close() error { return a.client.Destroy() }

// statusTransport turns error answers into upstream.StatusError, which the SDK wraps with %w.
type statusTransport struct {
	name string
	next http.RoundTripper
}

func (t statusTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.StatusCode < 400 {
		return resp, err
	}
	defer func() { _ = resp.Body.Close() }()
	return nil, upstream.NewStatusError(t.name, resp, time.Now())
}

// Run answers the turn.
func (a *Agent) Run(ctx context.Context, turn agent.Turn, history []agent.Message, sink agent.Sink) (agent.Result, error) {
	hist := make([]map[string]any, len(history))
	for i, m := range history {
		hist[i] = map[string]any{"seq": m.Seq, "turn_id": m.TurnID, "role": m.Role, "content": m.Content}
	}
	var res agent.Result
	err := a.cfg.Guard.Do(ctx, turn, sink, func(ctx context.Context, c *upstream.Call) error {
		msg := &sdk.Message{
			ID: turn.TurnID, ContextID: turn.SessionID, Role: sdk.MessageRoleUser,
			Parts:    sdk.ContentParts{sdk.TextPart{Text: turn.Text}},
			Metadata: map[string]any{HistoryKey: hist, "turnstile/attempt": turn.Attempt},
		}
		var err error
		res, err = a.stream(ctx, c, msg, sink)
		return err
	})
	return res, err
}

func (a *Agent) stream(ctx context.Context, c *upstream.Call, msg *sdk.Message, sink agent.Sink) (agent.Result, error) {
	var (
		taskID   sdk.TaskID
		out      strings.Builder
		final    []string
		finished bool
		state    string
	)
	emit := func(parts sdk.ContentParts) error {
		for _, p := range parts {
			if err := a.part(ctx, c, p, sink, &out); err != nil {
				return err
			}
		}
		return nil
	}
	err := func() error {
		for ev, err := range a.client.SendStreamingMessage(ctx, &sdk.MessageSendParams{Message: msg}) {
			if err != nil {
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
					return a.terminal(e.Status, &final, &finished, &state)
				}
			case *sdk.TaskArtifactUpdateEvent:
				taskID = e.TaskID
				if err := emit(e.Artifact.Parts); err != nil {
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
					return a.terminal(e.Status, &final, &finished, &state)
				}
			}
		}
		return nil
	}()
	if ctx.Err() != nil && taskID != "" && !finished {
		a.cancel(ctx, taskID)
	}
	if err != nil {
		return agent.Result{}, err
	}
	if ctx.Err() != nil {
		return agent.Result{}, context.Cause(ctx)
	}
	if !finished {
		return agent.Result{}, &upstream.StreamError{Upstream: a.cfg.URL, Message: "stream ended before the task finished"}
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

// cancel forwards the turn's end to the remote task, on a context of its own.
func (a *Agent) cancel(ctx context.Context, id sdk.TaskID) {
	cctx, stop := context.WithTimeout(context.WithoutCancel(ctx), a.cfg.CancelTimeout)
	defer stop()
	_, _ = a.client.CancelTask(cctx, &sdk.TaskIDParams{ID: id})
}

func (a *Agent) terminal(st sdk.TaskStatus, final *[]string, finished *bool, state *string) error {
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
		return &upstream.StreamError{Upstream: a.cfg.URL, Message: "task failed: " + msg}
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
	}
	return nil
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
