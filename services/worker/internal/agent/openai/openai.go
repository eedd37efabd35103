package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/turnstile-run/turnstile/pkg/sse"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/pool"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/upstream"
)

// Config configures the agent.
type Config struct {
	// BaseURL is the API root, e.g. https://api.example.com/v1; requests go to BaseURL/chat/completions.
	BaseURL string
	// APIKey is sent as a bearer token when set.
	APIKey string
	Model  string
	// System, when set, is the first message of every conversation.
	System string
	// Tools are the tools the model may call, by name. Their descriptions are not sent; a model that
	// should call them must be told so by System.
	Tools map[string]agent.Tool
	// HeaderTimeout bounds the wait for the answer's headers. Defaults to 60s.
	HeaderTimeout time.Duration
	// MaxEventBytes bounds one streamed event. Defaults to 1 MiB.
	MaxEventBytes int
	// MaxSteps bounds the model calls of one turn (each tool round is one). Defaults to 8.
	MaxSteps int
	// Client is the HTTP client. Defaults to a client without overall timeout (the turn's deadline
	// bounds the call).
	Client *http.Client
	// Guard protects the upstream. Defaults to upstream.New with the default settings.
	Guard *upstream.Guard
}

// Agent is the OpenAI-compatible agent.
type Agent struct {
	cfg Config
}

// New returns an agent.
func New(cfg Config) (*Agent, error) {
	if cfg.BaseURL == "" && (cfg.Guard == nil || !cfg.Guard.Balanced()) {
		return nil, errors.New("openai agent: base URL is required")
	}
	if cfg.Model == "" {
		return nil, errors.New("openai agent: model is required")
	}
	cfg.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	if cfg.HeaderTimeout <= 0 {
		cfg.HeaderTimeout = 60 * time.Second
	}
	if cfg.MaxEventBytes <= 0 {
		cfg.MaxEventBytes = 1 << 20
	}
	if cfg.MaxSteps <= 0 {
		cfg.MaxSteps = 8
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Transport: newTransport(cfg.HeaderTimeout)}
	}
	if cfg.Guard == nil {
		cfg.Guard = upstream.New(upstream.Config{Name: cfg.BaseURL})
	}
	return &Agent{cfg: cfg}, nil
}

// newTransport is the default client's transport. A worker holds one model stream per running
// turn, for the whole answer, so what a stream holds is held thousands of times over:
//   - HTTP/2 wherever the upstream offers it over TLS (OpenAI and most hosted models do): streams
//     share a few connections, so thousands of held turns are a few sockets and TLS sessions, not
//     one each (open files, handshakes);
//   - a small write buffer, since a request is written once, and idle connections kept for as many
//     turns as the upstream guard lets through, so a finished answer's connection serves the next.
func newTransport(headerTimeout time.Duration) *http.Transport {
	t := upstream.NewTransport(headerTimeout)
	t.ForceAttemptHTTP2 = true
	t.WriteBufferSize = 1 << 10
	t.MaxIdleConnsPerHost = 1024
	return t
}

// Guard returns the agent's upstream guard.
func (a *Agent) Guard() *upstream.Guard { return a.cfg.Guard }

type message struct {
	Role       string     `json:"role"`
	Content    *string    `json:"content"`
	ToolCalls  []toolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

type toolCall struct {
	Index    int    `json:"index"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments,omitempty"`
	} `json:"function"`
}

type request struct {
	Model         string    `json:"model"`
	Messages      []message `json:"messages"`
	Stream        bool      `json:"stream"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	User string `json:"user,omitempty"`
}

type chunk struct {
	Choices []choice `json:"choices"`
	Usage   *struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
		TotalTokens      int64 `json:"total_tokens"`
	} `json:"usage"`
	Error *apiError `json:"error"`
}

type choice struct {
	Delta        delta  `json:"delta"`
	FinishReason string `json:"finish_reason"`
}

type delta struct {
	Content   string     `json:"content"`
	ToolCalls []toolCall `json:"tool_calls"`
}

// apiError is the error object of the API, in an error answer or inside a stream.
type apiError struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	// Code is a string ("rate_limit_exceeded") on OpenAI, an HTTP status number on some compatible
	// servers.
	Code any `json:"code"`
}

// statusOf names the HTTP statuses that OpenAI-compatible APIs' error codes and types stand for.
var statusOf = map[string]int{
	"rate_limit_exceeded": http.StatusTooManyRequests, "rate_limit_error": http.StatusTooManyRequests,
	"requests": http.StatusTooManyRequests, "tokens": http.StatusTooManyRequests,
	"invalid_api_key": http.StatusUnauthorized, "authentication_error": http.StatusUnauthorized,
	"permission_error": http.StatusForbidden, "invalid_request_error": http.StatusBadRequest,
	"model_not_found": http.StatusNotFound, "not_found_error": http.StatusNotFound,
	"server_error": http.StatusInternalServerError, "api_error": http.StatusInternalServerError,
	"overloaded_error": http.StatusServiceUnavailable,
}

// streamError turns an error object the upstream sent inside its stream into an
// upstream.StreamError naming the HTTP status it stands for, so it is classified like that answer:
// a numeric code is the status itself, a known code or type names one. The pause it asks for is
// read from its message ("Please try again in 1.5s.") or else from the answer's Retry-After.
func (a *Agent) streamError(name string, e apiError, header http.Header) *upstream.StreamError {
	se := &upstream.StreamError{Upstream: name, Message: e.Message}
	switch c := e.Code.(type) {
	case float64:
		se.Status = int(c)
	case string:
		if n, err := strconv.Atoi(c); err == nil {
			se.Status = n
		} else {
			se.Code, se.Status = c, statusOf[c]
		}
	}
	if se.Status < 400 || se.Status > 599 {
		se.Status = 0
	}
	if se.Status == 0 {
		se.Status = statusOf[e.Type]
	}
	if se.Code == "" {
		se.Code = e.Type
	}
	se.Overload = se.Status == 0 && strings.Contains(e.Type, "overload")
	if se.RetryAfter = upstream.RetryHint(e.Message); se.RetryAfter == 0 {
		se.RetryAfter = upstream.ParseRetryAfter(header.Get("Retry-After"), time.Now())
	}
	return se
}

// eventError reads the data of an SSE event named "error": an error object, bare or under
// "error", or plain text.
func eventError(data string) apiError {
	var v struct {
		apiError
		Error *apiError `json:"error"`
	}
	if json.Unmarshal([]byte(data), &v) != nil {
		return apiError{Message: data}
	}
	if v.Error != nil {
		return *v.Error
	}
	if v.Message == "" {
		v.Message = data
	}
	return v.apiError
}

func text(s string) *string { return &s }

// Run answers the turn.
//
// Run, call and read keep their frames small, and the rare work (tool rounds, the request's
// encoding) in functions of its own: a held turn's goroutine waits for the model's next token under
// all of them for the whole answer, and the runtime keeps a goroutine's stack at least four times
// what it uses while it waits.
func (a *Agent) Run(ctx context.Context, turn agent.Turn, history []agent.Message, sink agent.Sink) (agent.Result, error) {
	msgs := a.messages(turn.Text, history)
	key, user := routeKey(&turn), turn.SessionID
	var prior map[string]agent.ToolResult
	var out strings.Builder
	var usage *agent.Usage
	step := 0
	for range a.cfg.MaxSteps {
		var st stepResult
		err := a.cfg.Guard.Do(ctx, turn, sink, func(ctx context.Context, c *upstream.Call) error {
			var err error
			st, err = a.call(ctx, c, key, user, msgs, sink)
			return err
		})
		out.WriteString(st.text)
		if st.usage != nil {
			if usage == nil {
				usage = &agent.Usage{Model: a.cfg.Model}
			}
			usage.PromptTokens += st.usage.PromptTokens
			usage.CompletionTokens += st.usage.CompletionTokens
			usage.TotalTokens += st.usage.TotalTokens
		}
		if err != nil {
			return agent.Result{}, err
		}
		if len(st.calls) == 0 {
			return agent.Result{Text: out.String(), Usage: usage}, nil
		}
		if prior == nil {
			prior = priorResults(turn.Prior)
		}
		if msgs, err = a.toolRound(ctx, turn.TurnID, prior, msgs, &st, &step, sink); err != nil {
			return agent.Result{}, err
		}
	}
	return agent.Result{}, fmt.Errorf("openai agent: more than %d model calls in one turn: %w", a.cfg.MaxSteps, agent.ErrPermanent)
}

// messages is the conversation of the turn's first model call: the system message, the session
// history and the turn's text. Not inlined, so its locals stay out of Run's frame.
//
//go:noinline
func (a *Agent) messages(userText string, history []agent.Message) []message {
	msgs := make([]message, 0, len(history)+2)
	if a.cfg.System != "" {
		msgs = append(msgs, message{Role: "system", Content: text(a.cfg.System)})
	}
	for _, m := range history {
		msgs = append(msgs, message{Role: m.Role, Content: text(m.Content)})
	}
	return append(msgs, message{Role: "user", Content: text(userText)})
}

// routeKey is pool.RouteKey, not inlined, so the copy of the turn it takes stays out of Run's
// frame.
//
//go:noinline
func routeKey(turn *agent.Turn) string { return pool.RouteKey(*turn) }

// toolRound announces, runs and answers the tool calls of one model call (st), counting them in
// step, and returns the conversation with the call and the results appended.
func (a *Agent) toolRound(ctx context.Context, turnID string, prior map[string]agent.ToolResult, msgs []message, st *stepResult, step *int, sink agent.Sink) ([]message, error) {
	assistant := message{Role: "assistant", ToolCalls: st.calls}
	if st.text != "" {
		assistant.Content = text(st.text)
	}
	msgs = append(msgs, assistant)
	for _, tc := range st.calls {
		*step++
		key := turnID + ":" + strconv.Itoa(*step)
		args := json.RawMessage(tc.Function.Arguments)
		if !json.Valid(args) {
			args = json.RawMessage(strconv.Quote(tc.Function.Arguments))
		}
		if err := sink.ToolCall(ctx, agent.ToolCall{CallID: tc.ID, Name: tc.Function.Name, Arguments: args, IdempotencyKey: key}); err != nil {
			return msgs, err
		}
		res := a.runTool(ctx, prior, key, tc.Function.Name, args)
		res.CallID = tc.ID
		if err := sink.ToolResult(ctx, res); err != nil {
			return msgs, err
		}
		content := string(res.Result)
		if res.Error != "" {
			content = `{"error":` + strconv.Quote(res.Error) + `}`
		}
		msgs = append(msgs, message{Role: "tool", ToolCallID: tc.ID, Content: text(content)})
	}
	return msgs, nil
}

func (a *Agent) runTool(ctx context.Context, prior map[string]agent.ToolResult, key, name string, args json.RawMessage) agent.ToolResult {
	if r, ok := prior[key]; ok {
		return r
	}
	tool, ok := a.cfg.Tools[name]
	if !ok {
		return agent.ToolResult{Error: fmt.Sprintf("unknown tool %q", name)}
	}
	res, err := tool(ctx, key, args)
	if err != nil {
		return agent.ToolResult{Error: err.Error()}
	}
	return agent.ToolResult{Result: res}
}

// priorResults indexes the tool results earlier attempts published by the idempotency key of their
// call, so the same step of a retried turn reuses them.
func priorResults(prior []agent.PriorEvent) map[string]agent.ToolResult {
	keys := map[string]string{}
	out := map[string]agent.ToolResult{}
	for _, ev := range prior {
		var d struct {
			CallID         string          `json:"call_id"`
			IdempotencyKey string          `json:"idempotency_key"`
			Result         json.RawMessage `json:"result"`
			Error          string          `json:"error"`
		}
		if json.Unmarshal(ev.Data, &d) != nil {
			continue
		}
		switch ev.Type {
		case "turn.tool_call":
			keys[d.CallID] = d.IdempotencyKey
		case "turn.tool_result":
			if k := keys[d.CallID]; k != "" {
				out[k] = agent.ToolResult{Result: d.Result, Error: d.Error}
			}
		}
	}
	return out
}

type stepResult struct {
	text  string
	calls []toolCall
	usage *agent.Usage
}

// RouteKeyHeader carries every request's route key (see pool.RouteKey), so an L7 proxy in front
// of the replicas can hash on it.
const RouteKeyHeader = "X-Turnstile-Route-Key"

// call makes one model call of the turn with the conversation msgs and streams its answer to sink.
// key is the turn's route key (pool.RouteKey) and user its session.
func (a *Agent) call(ctx context.Context, c *upstream.Call, key, user string, msgs []message, sink agent.Sink) (stepResult, error) {
	base := a.cfg.BaseURL
	if c.Target != nil {
		base = strings.TrimRight(c.Target.Address(), "/")
	}
	resp, err := a.send(ctx, base, key, user, msgs)
	if err != nil {
		return stepResult{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	c.Responded()
	if resp.StatusCode != http.StatusOK {
		return stepResult{}, upstream.NewStatusError(base, resp, time.Now())
	}
	return a.read(ctx, c, base, resp, sink)
}

// send posts the chat request with the conversation msgs to base and returns the answer's head.
func (a *Agent) send(ctx context.Context, base, key, user string, msgs []message) (*http.Response, error) {
	body := request{Model: a.cfg.Model, Messages: msgs, Stream: true, User: user}
	body.StreamOptions.IncludeUsage = true
	payload, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encode chat request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/chat/completions", &sentBody{b: payload})
	if err != nil {
		return nil, fmt.Errorf("build chat request: %w", agent.ErrPermanent)
	}
	req.ContentLength = int64(len(payload))
	req.GetBody = func() (io.ReadCloser, error) {
		payload, err := json.Marshal(body)
		return &sentBody{b: payload}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set(RouteKeyHeader, key)
	if a.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+a.cfg.APIKey)
	}
	resp, err := a.cfg.Client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("chat completions request: %w", err)
	}
	return resp, nil
}

// sentBody is a request body that lets go of its bytes once they are read to the end. The transport
// keeps a request's body until the answer's stream ends, which for a model's answer is the whole
// turn: the encoded conversation (the session's history) would be held that long by every running
// turn. The request's GetBody encodes it again when the transport must send it again.
type sentBody struct{ b []byte }

func (s *sentBody) Read(p []byte) (int, error) {
	if len(s.b) == 0 {
		s.b = nil
		return 0, io.EOF
	}
	n := copy(p, s.b)
	if s.b = s.b[n:]; len(s.b) == 0 {
		s.b = nil
	}
	return n, nil
}

func (s *sentBody) Close() error {
	s.b = nil
	return nil
}

// read streams the answer resp from base to sink, up to its [DONE].
func (a *Agent) read(ctx context.Context, c *upstream.Call, base string, resp *http.Response, sink agent.Sink) (stepResult, error) {
	var st stepResult
	var calls map[int]*toolCall
	var out strings.Builder
	r := newReader(resp.Body, a.cfg.MaxEventBytes)
	for {
		ev, err := r.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			st.text = out.String()
			return st, fmt.Errorf("chat completions stream ended before [DONE]: %w", err)
		}
		if ev.Type == "error" {
			st.text = out.String()
			return st, a.streamError(base, eventError(ev.Data), resp.Header)
		}
		if strings.TrimSpace(ev.Data) == "[DONE]" {
			break
		}
		var ch chunk
		if err := decodeChunk(ev.Data, &ch); err != nil {
			st.text = out.String()
			return st, fmt.Errorf("decode chat completion chunk: %w", err)
		}
		if ch.Error != nil {
			st.text = out.String()
			return st, a.streamError(base, *ch.Error, resp.Header)
		}
		if ch.Usage != nil {
			st.usage = &agent.Usage{PromptTokens: ch.Usage.PromptTokens, CompletionTokens: ch.Usage.CompletionTokens, TotalTokens: ch.Usage.TotalTokens}
			if st.usage.TotalTokens == 0 {
				st.usage.TotalTokens = st.usage.PromptTokens + st.usage.CompletionTokens
			}
		}
		for i := range ch.Choices {
			choice := &ch.Choices[i]
			if d := choice.Delta.Content; d != "" {
				c.Emitted()
				if err := sink.Delta(ctx, d); err != nil {
					st.text = out.String()
					return st, err
				}
				out.WriteString(d)
			}
			if len(choice.Delta.ToolCalls) > 0 {
				calls = addToolCalls(calls, choice.Delta.ToolCalls)
			}
		}
	}
	st.text = out.String()
	st.calls = toolCalls(calls)
	return st, nil
}

// newReader is sse.NewReader, not inlined, so the reader is on the heap rather than in read's frame,
// which a held turn keeps for the whole answer under every call that reads the next token.
//
//go:noinline
func newReader(body io.Reader, maxBytes int) *sse.Reader { return sse.NewReader(body, maxBytes) }

// addToolCalls adds the fragments of tool calls one chunk carried to calls, by index, and returns
// calls (made on the first fragment). Not inlined, so its locals stay out of read's frame.
//
//go:noinline
func addToolCalls(calls map[int]*toolCall, frags []toolCall) map[int]*toolCall {
	if calls == nil {
		calls = map[int]*toolCall{}
	}
	for _, tc := range frags {
		cur, ok := calls[tc.Index]
		if !ok {
			cur = &toolCall{Index: tc.Index, Type: "function"}
			calls[tc.Index] = cur
		}
		if tc.ID != "" {
			cur.ID = tc.ID
		}
		if tc.Function.Name != "" {
			cur.Function.Name += tc.Function.Name
		}
		cur.Function.Arguments += tc.Function.Arguments
	}
	return calls
}

// toolCalls returns the assembled calls in the order of their indexes, each with an ID.
func toolCalls(calls map[int]*toolCall) []toolCall {
	if len(calls) == 0 {
		return nil
	}
	idx := make([]int, 0, len(calls))
	for i := range calls {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	out := make([]toolCall, 0, len(idx))
	for _, i := range idx {
		tc := *calls[i]
		if tc.ID == "" {
			tc.ID = "call_" + strconv.Itoa(i)
		}
		out = append(out, tc)
	}
	return out
}
