package httpagent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/turnstile-run/turnstile/pkg/sse"
	"github.com/turnstile-run/turnstile/pkg/wire"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/pool"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/upstream"
)

// Config configures the agent.
type Config struct {
	URL string
	// Headers are added to every request (for example an Authorization header).
	Headers map[string]string
	// HeaderTimeout bounds the wait for the answer's headers. Defaults to 30s.
	HeaderTimeout time.Duration
	// IdleTimeout bounds the silence between two events. Defaults to 60s.
	IdleTimeout time.Duration
	// MaxEventBytes bounds one event. Defaults to 1 MiB.
	MaxEventBytes int
	// MaxResponseBytes bounds a whole answer. Defaults to 16 MiB.
	MaxResponseBytes int64
	Client           *http.Client
	// Guard protects the upstream. Defaults to upstream.New with the default settings.
	Guard *upstream.Guard
}

// Agent is the HTTP agent.
type Agent struct{ cfg Config }

// New returns an agent.
func New(cfg Config) (*Agent, error) {
	if cfg.URL == "" && (cfg.Guard == nil || !cfg.Guard.Balanced()) {
		return nil, errors.New("http agent: URL is required")
	}
	if cfg.HeaderTimeout <= 0 {
		cfg.HeaderTimeout = 30 * time.Second
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 60 * time.Second
	}
	if cfg.MaxEventBytes <= 0 {
		cfg.MaxEventBytes = 1 << 20
	}
	if cfg.MaxResponseBytes <= 0 {
		cfg.MaxResponseBytes = 16 << 20
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Transport: upstream.NewTransport(cfg.HeaderTimeout)}
	}
	if cfg.Guard == nil {
		cfg.Guard = upstream.New(upstream.Config{Name: cfg.URL})
	}
	return &Agent{cfg: cfg}, nil
}

// Guard returns the agent's upstream guard.
func (a *Agent) Guard() *upstream.Guard { return a.cfg.Guard }

// Request is the body the agent posts.
type Request struct {
	TurnID    string         `json:"turn_id"`
	SessionID string         `json:"session_id"`
	Tenant    string         `json:"tenant,omitempty"`
	Attempt   int            `json:"attempt"`
	Text      string         `json:"text"`
	Metadata  map[string]any `json:"metadata,omitempty"`
	Deadline  time.Time      `json:"deadline"`
	History   []Message      `json:"history"`
	Prior     []PriorEvent   `json:"prior,omitempty"`
}

// Message is one history entry of a Request.
type Message struct {
	Seq     int64  `json:"seq"`
	TurnID  string `json:"turn_id"`
	Role    string `json:"role"`
	Content string `json:"content"`
}

// PriorEvent is an event an earlier attempt of the turn published.
type PriorEvent struct {
	Type    string          `json:"type"`
	Attempt int             `json:"attempt"`
	Data    json.RawMessage `json:"data"`
}

// Event is one object of the answer stream, as schema/events.schema.json describes it.
type Event struct {
	Type           string          `json:"type"`
	Text           string          `json:"text,omitempty"`
	CallID         string          `json:"call_id,omitempty"`
	Name           string          `json:"name,omitempty"`
	Arguments      json.RawMessage `json:"arguments,omitempty"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	Result         json.RawMessage `json:"result,omitempty"`
	// Data is a custom event's value.
	Data       json.RawMessage `json:"data,omitempty"`
	Error      string          `json:"error,omitempty"`
	Message    string          `json:"message,omitempty"`
	Retryable  bool            `json:"retryable,omitempty"`
	Overloaded bool            `json:"overloaded,omitempty"`
	// Status, on an error, is the HTTP status the error stands for: it is then classified like an
	// answer of that status, whatever Retryable and Overloaded say.
	Status int `json:"status,omitempty"`
	// RetryAfter, on an error, is the pause in seconds the service asks for before a retry.
	RetryAfter float64 `json:"retry_after,omitempty"`
	// Output, on done or input_required, is the final answer; nil means the deltas' texts joined.
	Output *string `json:"output,omitempty"`
	// InputTokens, OutputTokens, TotalTokens and Model are a usage event's.
	InputTokens  int64  `json:"input_tokens,omitempty"`
	OutputTokens int64  `json:"output_tokens,omitempty"`
	TotalTokens  int64  `json:"total_tokens,omitempty"`
	Model        string `json:"model,omitempty"`
}

// addUsage adds a usage event's counts to the sum so far (nil for none yet).
func addUsage(sum *agent.Usage, ev Event) *agent.Usage {
	if sum == nil {
		sum = &agent.Usage{}
	}
	total := ev.TotalTokens
	if total == 0 {
		total = ev.InputTokens + ev.OutputTokens
	}
	sum.PromptTokens += ev.InputTokens
	sum.CompletionTokens += ev.OutputTokens
	sum.TotalTokens += total
	if ev.Model != "" {
		sum.Model = ev.Model
	}
	return sum
}

// Run answers the turn.
func (a *Agent) Run(ctx context.Context, turn agent.Turn, history []agent.Message, sink agent.Sink) (agent.Result, error) {
	body := Request{
		TurnID: turn.TurnID, SessionID: turn.SessionID, Tenant: turn.Tenant, Attempt: turn.Attempt, Text: turn.Text,
		Metadata: turn.Metadata, Deadline: turn.Deadline, History: make([]Message, len(history)),
	}
	for i, m := range history {
		body.History[i] = Message{Seq: m.Seq, TurnID: m.TurnID, Role: m.Role, Content: m.Content}
	}
	for _, p := range turn.Prior {
		body.Prior = append(body.Prior, PriorEvent{Type: p.Type, Attempt: p.Attempt, Data: p.Data})
	}
	payload, err := json.Marshal(body)
	if err != nil {
		return agent.Result{}, fmt.Errorf("encode http agent request: %w", errors.Join(err, agent.ErrPermanent))
	}
	var res agent.Result
	err = a.cfg.Guard.Do(ctx, turn, sink, func(ctx context.Context, c *upstream.Call) error {
		var err error
		res, err = a.call(ctx, c, turn, payload, sink)
		return err
	})
	if err != nil {
		return agent.Result{}, err
	}
	return res, nil
}

// RouteKeyHeader carries every request's route key (see pool.RouteKey), so an L7 proxy in front
// of the replicas can hash on it.
const RouteKeyHeader = "X-Turnstile-Route-Key"

func (a *Agent) call(ctx context.Context, c *upstream.Call, turn agent.Turn, payload []byte, sink agent.Sink) (agent.Result, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	target := a.cfg.URL
	if c.Target != nil {
		target = c.Target.Address()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(payload))
	if err != nil {
		return agent.Result{}, fmt.Errorf("build http agent request: %w", errors.Join(err, agent.ErrPermanent))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/x-ndjson, text/event-stream")
	req.Header.Set("Idempotency-Key", turn.TurnID)
	req.Header.Set(RouteKeyHeader, pool.RouteKey(turn))
	if !turn.Deadline.IsZero() {
		// The convention intake reads, so a service that is itself a turnstile shares the deadline;
		// X-Turnstile-Deadline stays for services written against it.
		req.Header.Set("X-Deadline-Epoch-Ms", strconv.FormatInt(turn.Deadline.UnixMilli(), 10))
		req.Header.Set("X-Turnstile-Deadline", turn.Deadline.UTC().Format(time.RFC3339Nano))
	}
	for k, v := range a.cfg.Headers {
		req.Header.Set(k, v)
	}
	resp, err := a.cfg.Client.Do(req)
	if err != nil {
		return agent.Result{}, fmt.Errorf("http agent request: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	c.Responded()
	if resp.StatusCode != http.StatusOK {
		return agent.Result{}, upstream.NewStatusError(target, resp, time.Now())
	}
	errIdle := errors.New("http agent: idle timeout between events")
	idle := time.AfterFunc(a.cfg.IdleTimeout, func() { cancel(errIdle) })
	defer idle.Stop()
	body := &limitedReader{r: resp.Body, left: a.cfg.MaxResponseBytes}
	next := a.reader(resp.Header.Get("Content-Type"), body)

	var out strings.Builder
	var usage *agent.Usage
	for {
		ev, err := next()
		if err != nil {
			switch {
			case errors.Is(context.Cause(ctx), errIdle):
				err = fmt.Errorf("%w: %w", errIdle, io.ErrUnexpectedEOF)
			case body.exceeded:
				err = fmt.Errorf("http agent answer exceeds %d bytes: %w", a.cfg.MaxResponseBytes, agent.ErrPermanent)
			case errors.Is(err, sse.ErrTooLarge) || errors.Is(err, bufio.ErrTooLong):
				err = fmt.Errorf("http agent event exceeds %d bytes: %w", a.cfg.MaxEventBytes, agent.ErrPermanent)
			case errors.Is(err, io.EOF):
				err = fmt.Errorf("http agent answer ended without a done event: %w", io.ErrUnexpectedEOF)
			}
			return agent.Result{}, err
		}
		idle.Reset(a.cfg.IdleTimeout)
		switch ev.Type {
		case "delta":
			if ev.Text == "" {
				continue
			}
			c.Emitted()
			if err := sink.Delta(ctx, ev.Text); err != nil {
				return agent.Result{}, err
			}
			out.WriteString(ev.Text)
		case "tool_call":
			c.Emitted()
			if err := sink.ToolCall(ctx, agent.ToolCall{CallID: ev.CallID, Name: ev.Name, Arguments: ev.Arguments, IdempotencyKey: ev.IdempotencyKey}); err != nil {
				return agent.Result{}, err
			}
		case "tool_result":
			c.Emitted()
			if err := sink.ToolResult(ctx, agent.ToolResult{CallID: ev.CallID, Result: ev.Result, Error: ev.Error}); err != nil {
				return agent.Result{}, err
			}
		case "custom":
			c.Emitted()
			if err := agent.EmitCustom(ctx, sink, ev.Name, ev.Data); err != nil {
				return agent.Result{}, err
			}
		case "usage":
			usage = addUsage(usage, ev)
		case "error":
			msg := ev.Message
			if ev.Status == 0 && !ev.Retryable && !ev.Overloaded {
				return agent.Result{}, fmt.Errorf("http agent reported: %s: %w", msg, agent.ErrPermanent)
			}
			return agent.Result{}, &upstream.StreamError{
				Upstream: target, Message: msg, Status: ev.Status, Overload: ev.Overloaded,
				RetryAfter: time.Duration(ev.RetryAfter * float64(time.Second)),
			}
		case "done", "input_required":
			res := agent.Result{Text: out.String(), Usage: usage}
			if ev.Output != nil {
				res.Text = *ev.Output
			}
			if ev.Type == "input_required" {
				res.State = wire.OutputInputRequired
			}
			return res, nil
		}
	}
}

// reader returns a function yielding the answer's events, NDJSON or SSE by content type, each
// checked against the protocol's schema (decodeEvent).
func (a *Agent) reader(contentType string, body io.Reader) func() (Event, error) {
	n := 0
	mt, _, _ := mime.ParseMediaType(contentType)
	if mt == "text/event-stream" {
		r := sse.NewReader(body, a.cfg.MaxEventBytes)
		return func() (Event, error) {
			for {
				raw, err := r.Next()
				if err != nil {
					return Event{}, err
				}
				if strings.TrimSpace(raw.Data) == "" {
					continue
				}
				n++
				return decodeEvent(n, raw.Type, []byte(raw.Data))
			}
		}
	}
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 4096), a.cfg.MaxEventBytes)
	return func() (Event, error) {
		for sc.Scan() {
			line := bytes.TrimSpace(sc.Bytes())
			if len(line) == 0 {
				continue
			}
			n++
			return decodeEvent(n, "", line)
		}
		if err := sc.Err(); err != nil {
			return Event{}, err
		}
		return Event{}, io.EOF
	}
}

type limitedReader struct {
	r        io.Reader
	left     int64
	exceeded bool
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.left <= 0 {
		l.exceeded = true
		return 0, errors.New("answer size limit reached")
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}
