package rpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnstile-run/turnstile/pkg/frontdoor"
	"github.com/turnstile-run/turnstile/pkg/region"
	"github.com/turnstile-run/turnstile/services/a2a/internal/tasks"
)

// Path is where the JSON-RPC endpoint is mounted.
const Path = "/a2a"

// Defaults of Config.
const (
	MaxBodyDefault      = 256 << 10
	KeepAliveDefault    = 15 * time.Second
	WriteTimeoutDefault = 10 * time.Second
)

// Versions are the A2A-Version header values this endpoint speaks (an absent header means 0.3).
var Versions = []string{"0.3", "0.3.0"}

// The protocol 0.3 method names, and the 1.0 names that map one to one onto them.
var (
	methods = map[string]bool{
		"message/send": true, "message/stream": true, "tasks/get": true, "tasks/cancel": true,
		"tasks/resubscribe": true, "tasks/pushNotificationConfig/get": true, "tasks/pushNotificationConfig/set": true,
		"tasks/pushNotificationConfig/list": true, "tasks/pushNotificationConfig/delete": true,
		"agent/getAuthenticatedExtendedCard": true,
	}
	aliases = map[string]string{
		"SendMessage": "message/send", "SendStreamingMessage": "message/stream", "GetTask": "tasks/get",
		"CancelTask": "tasks/cancel", "SubscribeToTask": "tasks/resubscribe",
	}
)

// Config configures the endpoint.
type Config struct {
	// MaxBody bounds a request body. Defaults to MaxBodyDefault.
	MaxBody int64
	// KeepAlive is the interval of keep-alive comments on streams. Defaults to KeepAliveDefault.
	KeepAlive time.Duration
	// WriteTimeout bounds one write to a stream's client. Defaults to WriteTimeoutDefault.
	WriteTimeout time.Duration
	// Region is this region (TURNSTILE_REGION and the region map): a request naming another
	// region's task or context is answered 421 with JSON-RPC error region.RPCMisdirected. The
	// zero value is single-region mode.
	Region region.Local
}

// Server is the JSON-RPC endpoint.
type Server struct {
	cfg      Config
	sdk      http.Handler
	requests *prometheus.CounterVec
}

// New returns the endpoint over h, registering its metrics with reg.
func New(cfg Config, h *tasks.Handler, reg prometheus.Registerer) *Server {
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = MaxBodyDefault
	}
	if cfg.KeepAlive <= 0 {
		cfg.KeepAlive = KeepAliveDefault
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = WriteTimeoutDefault
	}
	s := &Server{
		cfg: cfg, sdk: a2asrv.NewJSONRPCHandler(h),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "turnstile_a2a_requests_total",
			Help: "A2A JSON-RPC requests by method (the protocol 0.3 name, or unknown) and outcome (ok or the JSON-RPC error's name).",
		}, []string{"method", "outcome"}),
	}
	reg.MustRegister(s.requests, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "turnstile_a2a_streams",
		Help: "Open A2A streams (message/stream and tasks/resubscribe) of this replica.",
	}, func() float64 { return float64(h.Len()) }))
	return s
}

// request is a JSON-RPC request as it arrives.
type request struct {
	JSONRPC string          `json:"jsonrpc"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
	ID      json.RawMessage `json:"id,omitempty"`
}

// ServeHTTP checks the request, then lets the SDK dispatch it to the handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	method := "unknown"
	call := tasks.NewCall(frontdoor.Credential(r.Header.Get("Authorization")), r.Header.Get("Last-Event-ID"))
	call.Deadline = r.Header.Get(frontdoor.DeadlineHeader)
	defer func() { s.requests.WithLabelValues(method, call.Outcome()).Inc() }()
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, nil, call, fmt.Errorf("use POST: %w", a2a.ErrInvalidRequest))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, nil, call, fmt.Errorf("body over %d bytes: %w", s.cfg.MaxBody, a2a.ErrInvalidRequest))
			return
		}
		writeError(w, http.StatusBadRequest, nil, call, fmt.Errorf("read body: %w", a2a.ErrParseError))
		return
	}
	var req request
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusOK, nil, call, fmt.Errorf("%w: %w", a2a.ErrParseError, err))
		return
	}
	if !validID(req.ID) {
		writeError(w, http.StatusOK, nil, call, fmt.Errorf("id must be a string, a number or null: %w", a2a.ErrInvalidRequest))
		return
	}
	if req.JSONRPC != "2.0" || req.Method == "" {
		writeError(w, http.StatusOK, req.ID, call, fmt.Errorf(`jsonrpc must be "2.0" and method set: %w`, a2a.ErrInvalidRequest))
		return
	}
	if m, ok := aliases[req.Method]; ok {
		req.Method = m
	}
	if !methods[req.Method] {
		writeError(w, http.StatusOK, req.ID, call, fmt.Errorf("%q: %w", req.Method, a2a.ErrMethodNotFound))
		return
	}
	method = req.Method
	if v := strings.TrimSpace(r.Header.Get("A2A-Version")); v != "" && !speaks(v) {
		writeError(w, http.StatusOK, req.ID, call, fmt.Errorf("A2A-Version %q: this agent speaks %s: %w", v, strings.Join(Versions, ", "), tasks.ErrVersionNotSupported))
		return
	}
	if err := checkParams(req.Method, req.Params); err != nil {
		writeError(w, http.StatusOK, req.ID, call, err)
		return
	}
	if owner, ok := misdirected(s.cfg.Region, req.Method, req.Params); ok {
		writeMisdirected(w, req.ID, call, owner)
		return
	}
	out, err := json.Marshal(req)
	if err != nil {
		writeError(w, http.StatusOK, req.ID, call, fmt.Errorf("%w: %w", a2a.ErrInternalError, err))
		return
	}
	r2 := r.Clone(tasks.WithCall(r.Context(), call))
	r2.Body = io.NopCloser(bytes.NewReader(out))
	r2.ContentLength = int64(len(out))
	streaming := req.Method == "message/stream" || req.Method == "tasks/resubscribe"
	rw := newWriter(w, call, streaming, s.cfg.KeepAlive, s.cfg.WriteTimeout)
	s.sdk.ServeHTTP(rw, r2)
	rw.finish(nullResult(req.ID))
}

// nullResult is the JSON-RPC success response whose result is null, for the request id.
func nullResult(id json.RawMessage) []byte {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  any             `json:"result"`
	}{"2.0", id, nil})
	return append(b, '\n')
}

func speaks(v string) bool {
	for _, s := range Versions {
		if v == s {
			return true
		}
	}
	return false
}

// validID reports whether a JSON-RPC id is absent, null, a string or a number.
func validID(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" {
		return true
	}
	switch t[0] {
	case '"':
		var s string
		return json.Unmarshal(t, &s) == nil
	case '{', '[', 't', 'f':
		return false
	}
	var n json.Number
	return json.Unmarshal(t, &n) == nil
}

// checkParams decodes params into the method's SDK type and checks what it requires, so a bad
// shape is invalid params (-32602), never a parse error.
func checkParams(method string, raw json.RawMessage) error {
	bad := func(why string) error { return fmt.Errorf("%s: %w", why, a2a.ErrInvalidParams) }
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		if method == "agent/getAuthenticatedExtendedCard" {
			return nil
		}
		return bad("params are required")
	}
	switch method {
	case "message/send", "message/stream":
		var p a2a.MessageSendParams
		if err := json.Unmarshal(raw, &p); err != nil {
			return bad("params are not MessageSendParams: " + err.Error())
		}
		switch {
		case p.Message == nil:
			return bad("message is required")
		case p.Message.ID == "":
			return bad("message.messageId is required")
		case len(p.Message.Parts) == 0:
			return bad("message.parts must not be empty")
		}
	case "tasks/get":
		var p a2a.TaskQueryParams
		if err := json.Unmarshal(raw, &p); err != nil {
			return bad("params are not TaskQueryParams: " + err.Error())
		}
		if p.ID == "" {
			return bad("id is required")
		}
	case "tasks/cancel", "tasks/resubscribe":
		var p a2a.TaskIDParams
		if err := json.Unmarshal(raw, &p); err != nil {
			return bad("params are not TaskIdParams: " + err.Error())
		}
		if p.ID == "" {
			return bad("id is required")
		}
	default:
		var p map[string]any
		if err := json.Unmarshal(raw, &p); err != nil {
			return bad("params must be an object")
		}
	}
	return nil
}

// misdirected reports whether a checked request names a task or context of another region, and
// which: a task ID (tasks/get, tasks/cancel, tasks/resubscribe, message.taskId) by its shape, a
// contextId by a prefix the region map knows (pkg/region). It reads nothing but the params.
func misdirected(place region.Local, method string, raw json.RawMessage) (string, bool) {
	if place.Code == "" {
		return "", false
	}
	var p struct {
		ID      string `json:"id"`
		Message *struct {
			TaskID    string `json:"taskId"`
			ContextID string `json:"contextId"`
		} `json:"message"`
	}
	if json.Unmarshal(raw, &p) != nil {
		return "", false
	}
	switch method {
	case "tasks/get", "tasks/cancel", "tasks/resubscribe":
		return place.Minted(p.ID)
	case "message/send", "message/stream":
		if p.Message == nil {
			return "", false
		}
		return place.Misdirected(p.Message.ContextID, p.Message.TaskID)
	}
	return "", false
}

// writeMisdirected answers a request for another region's task: HTTP 421 (as the native API
// answers) carrying the JSON-RPC error region.RPCMisdirected whose data names the owner.
func writeMisdirected(w http.ResponseWriter, id json.RawMessage, call *tasks.Call, owner string) {
	call.SetOutcome("misdirected")
	writeRPCError(w, http.StatusMisdirectedRequest, id, rpcError{
		Code:    region.RPCMisdirected,
		Message: "misdirected: this task belongs to region " + owner,
		Data:    map[string]any{region.MemberRegion: owner},
	})
}

// rpcError is a JSON-RPC error object.
type rpcError struct {
	Code    int            `json:"code"`
	Message string         `json:"message"`
	Data    map[string]any `json:"data,omitempty"`
}

// errorCodes are the JSON-RPC codes of the A2A errors this layer answers itself.
var errorCodes = []struct {
	err  error
	code int
}{
	{a2a.ErrParseError, -32700},
	{a2a.ErrInvalidRequest, -32600},
	{a2a.ErrMethodNotFound, -32601},
	{a2a.ErrInvalidParams, -32602},
	{tasks.ErrVersionNotSupported, tasks.VersionNotSupportedCode},
	{a2a.ErrInternalError, -32603},
}

// writeError answers a JSON-RPC error for a request the SDK never saw.
func writeError(w http.ResponseWriter, status int, id json.RawMessage, call *tasks.Call, err error) {
	call.SetOutcome(tasks.Outcome(err))
	e := rpcError{Code: -32603, Message: a2a.ErrInternalError.Error()}
	for _, c := range errorCodes {
		if errors.Is(err, c.err) {
			e = rpcError{Code: c.code, Message: c.err.Error(), Data: map[string]any{"error": err.Error()}}
			break
		}
	}
	writeRPCError(w, status, id, e)
}

// writeRPCError writes a JSON-RPC error response of request id (null when absent) with status.
func writeRPCError(w http.ResponseWriter, status int, id json.RawMessage, e rpcError) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	resp := struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   rpcError        `json:"error"`
	}{"2.0", id, e}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(resp)
}
