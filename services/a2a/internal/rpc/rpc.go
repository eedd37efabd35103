package rpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnstile-run/turnstile/pkg/frontdoor"
	"github.com/turnstile-run/turnstile/pkg/httpx"
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

// Versions are the protocol versions this endpoint speaks, by A2A-Version's Major.Minor (an
// absent header means 0.3 on JSON-RPC): 0.3 through the a2a-go SDK, 1.0 through v1Methods.
var Versions = []string{"0.3", V1}

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
	// Auth says whether API keys are required (TURNSTILE_AUTH=on): a request without a key intake
	// accepts is answered 401 before anything of it is read. Defaults to off.
	Auth bool
	// CORSOrigins may call the endpoint from a browser page (TURNSTILE_A2A_CORS_ORIGINS); "*"
	// allows any. Defaults to none: same origin only.
	CORSOrigins []string
}

// Server is the JSON-RPC endpoint.
type Server struct {
	cfg      Config
	h        *tasks.Handler
	sdk      http.Handler
	keys     *keyCheck
	cors     *httpx.CORS
	restCORS *httpx.CORS
	requests *prometheus.CounterVec
}

// New returns the endpoint over h, authenticating requests with who when cfg.Auth is set and
// registering its metrics with reg.
func New(cfg Config, h *tasks.Handler, who Authenticator, reg prometheus.Registerer) *Server {
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
		cfg: cfg, h: h, sdk: a2asrv.NewJSONRPCHandler(h),
		cors: httpx.NewCORS(cfg.CORSOrigins, "POST, OPTIONS",
			"Authorization, Content-Type, A2A-Version, A2A-Extensions, X-A2A-Extensions, Last-Event-ID, X-Deadline-Epoch-Ms",
			"WWW-Authenticate, Retry-After"),
		restCORS: httpx.NewCORS(cfg.CORSOrigins, "GET, POST, DELETE, OPTIONS",
			"Authorization, Content-Type, A2A-Version, A2A-Extensions, Last-Event-ID, X-Deadline-Epoch-Ms",
			"WWW-Authenticate, Retry-After"),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "turnstile_a2a_requests_total",
			Help: "A2A requests (0.3 and 1.0, JSON-RPC and HTTP+JSON) by method (the protocol 0.3 name, or unknown) and outcome (ok or the A2A error's name).",
		}, []string{"method", "outcome"}),
	}
	if cfg.Auth {
		s.keys = newKeyCheck(who)
	}
	reg.MustRegister(s.requests, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "turnstile_a2a_streams",
		Help: "Open A2A streams (message/stream and tasks/resubscribe) of this replica.",
	}, func() float64 { return float64(h.Len()) }))
	return s
}

// ServeHTTP answers a CORS preflight, authenticates the request before reading it, checks its
// JSON-RPC envelope and params, then lets the SDK dispatch it to the handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	method := "unknown"
	call := newCall(r)
	defer func() { s.requests.WithLabelValues(method, call.Outcome()).Inc() }()
	if !s.admit(w, r, call, s.cors, writeRefusal) {
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST, OPTIONS")
		writeError(w, http.StatusMethodNotAllowed, nil, call, fmt.Errorf("use POST: %w", a2a.ErrInvalidRequest))
		return
	}
	body, err := io.ReadAll(httpx.LimitBody(w, r, s.cfg.MaxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, nil, call, fmt.Errorf("body over %d bytes: %w", s.cfg.MaxBody, a2a.ErrInvalidRequest))
			return
		}
		writeError(w, http.StatusBadRequest, nil, call, fmt.Errorf("read body: %w", a2a.ErrParseError))
		return
	}
	body = bytes.TrimSpace(body)
	if !json.Valid(body) {
		writeError(w, http.StatusOK, nil, call, fmt.Errorf("the body is not JSON: %w", a2a.ErrParseError))
		return
	}
	if body[0] == '[' {
		s.batch(w, body, call)
		return
	}
	req, err := parseEnvelope(body)
	if err != nil {
		writeError(w, http.StatusOK, req.ID, call, err)
		return
	}
	v, err := version(r.Header.Get("A2A-Version"), r.URL.Query().Get("A2A-Version"), "0.3")
	if err != nil {
		if req.notification() {
			call.SetOutcome(tasks.Outcome(err))
			w.WriteHeader(http.StatusNoContent)
			return
		}
		writeError(w, http.StatusOK, req.ID, call, err)
		return
	}
	if v == V1 {
		method = s.serveV1(w, r, req, call)
		return
	}
	if m, ok := aliases[req.Method]; ok {
		req.Method = m
	}
	if methods[req.Method] {
		method = req.Method
	}
	if err := s.check(r, req); err != nil {
		if req.notification() {
			// JSON-RPC 2.0 answers no notification, not even its errors.
			call.SetOutcome(tasks.Outcome(err))
			w.WriteHeader(http.StatusNoContent)
			return
		}
		writeError(w, http.StatusOK, req.ID, call, err)
		return
	}
	if owner, ok := misdirected(s.cfg.Region, req.Method, req.Params); ok {
		if req.notification() {
			// The status still tells a router where to go; the body would be an answer.
			call.SetOutcome("misdirected")
			w.WriteHeader(http.StatusMisdirectedRequest)
			return
		}
		writeMisdirected(w, req.ID, call, owner)
		return
	}
	if req.notification() {
		s.notify(w, r, req, call)
		return
	}
	streaming := req.Method == "message/stream" || req.Method == "tasks/resubscribe"
	rw := newWriter(w, call, streaming, s.cfg.KeepAlive, s.cfg.WriteTimeout)
	s.dispatch(rw, r, req, call)
	rw.finish(nullResult(req.ID))
}

// newCall is the call of a request to either binding: its credential, Last-Event-ID, deadline
// and agent (WithAgent).
func newCall(r *http.Request) *tasks.Call {
	call := tasks.NewCall(frontdoor.Credential(r.Header.Get("Authorization")), r.Header.Get("Last-Event-ID"))
	call.Deadline = r.Header.Get(frontdoor.DeadlineHeader)
	call.Agent = AgentOf(r.Context())
	return call
}

// admit is what both bindings do before reading anything of a request: set the CORS headers of
// cors, answer a preflight, and check the key, answering a refusal with refuse (the binding's
// body). It reports whether the request goes on; when not, it was answered and call's outcome set.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, call *tasks.Call, cors *httpx.CORS, refuse func(http.ResponseWriter, *refusal)) bool {
	cors.Allow(w, r)
	if r.Method == http.MethodOptions {
		call.SetOutcome("preflight")
		cors.Preflight(w, r)
		return false
	}
	if s.keys != nil {
		if no := s.keys.check(r); no != nil {
			call.SetOutcome(no.outcome)
			refuse(w, no)
			return false
		}
	}
	return true
}

// check refuses a 0.3 request this layer can tell is wrong without the SDK: an unknown method
// (-32601), params that are not the method's (-32602).
func (s *Server) check(_ *http.Request, req envelope) error {
	if !methods[req.Method] {
		return fmt.Errorf("%q: %w", req.Method, a2a.ErrMethodNotFound)
	}
	if len(req.Params) > 0 {
		if name := duplicateMember(req.Params); name != "" {
			return fmt.Errorf("params have the member %q twice: %w", name, a2a.ErrInvalidParams)
		}
	}
	return checkParams(req.Method, req.Params)
}

// dispatch hands a checked request to the SDK, which answers it through w.
func (s *Server) dispatch(w http.ResponseWriter, r *http.Request, req envelope, call *tasks.Call) {
	out, err := json.Marshal(request{JSONRPC: "2.0", Method: req.Method, Params: req.Params, ID: req.ID})
	if err != nil {
		writeError(w, http.StatusOK, req.ID, call, fmt.Errorf("%w: %w", a2a.ErrInternalError, err))
		return
	}
	r2 := r.Clone(tasks.WithCall(r.Context(), call))
	r2.Body = io.NopCloser(bytes.NewReader(out))
	r2.ContentLength = int64(len(out))
	s.sdk.ServeHTTP(w, r2)
}

// notify runs a notification (a request without an id member) and answers 204 with no body, as
// JSON-RPC 2.0 has the server process a notification and never answer it. Only what changes
// something runs: a message is accepted as its turn without waiting for it (message/stream
// too: nobody reads the stream), a cancel or a push config change is made; a read
// (tasks/get, tasks/resubscribe, the push config reads, the extended card) has nothing to do
// and is not made. A refusal of the native API keeps its HTTP status (429/503 with
// Retry-After), still without a body, so a client may send the notification again.
func (s *Server) notify(w http.ResponseWriter, r *http.Request, req envelope, call *tasks.Call) {
	switch req.Method {
	case "message/send", "message/stream":
		req.Method, req.Params = "message/send", nonBlocking(req.Params)
	case "tasks/cancel", "tasks/pushNotificationConfig/set", "tasks/pushNotificationConfig/delete":
	default:
		w.WriteHeader(http.StatusNoContent)
		return
	}
	s.dispatch(discard{h: http.Header{}}, r, req, call)
	s.answerNotification(w, call)
}

// answerNotification answers a notification that ran: 204, or the refusal the handler asked for
// (429/503 with Retry-After, 401 with its challenge), without a body.
func (s *Server) answerNotification(w http.ResponseWriter, call *tasks.Call) {
	status, retry := call.Refusal()
	if status == 0 {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if retry > 0 || status != http.StatusUnauthorized {
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int((retry+time.Second-1)/time.Second))))
	}
	httpx.Challenge(w, status)
	w.WriteHeader(status)
}

// nonBlocking is message/send params with configuration.blocking false.
func nonBlocking(params json.RawMessage) json.RawMessage {
	var p map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil {
		return params
	}
	var c map[string]json.RawMessage
	_ = json.Unmarshal(p["configuration"], &c)
	if c == nil {
		c = map[string]json.RawMessage{}
	}
	c["blocking"] = json.RawMessage("false")
	p["configuration"], _ = json.Marshal(c)
	out, err := json.Marshal(p)
	if err != nil {
		return params
	}
	return out
}

// discard is the response writer of a notification's run: nothing of the SDK's answer is sent.
type discard struct{ h http.Header }

func (d discard) Header() http.Header         { return d.h }
func (d discard) Write(p []byte) (int, error) { return len(p), nil }
func (d discard) WriteHeader(int)             {}

// batch answers a JSON-RPC batch (a JSON array). A2A's JSON-RPC binding takes one request object
// per HTTP request (A2A 0.3, section 7), and the SDK servers refuse batches; JSON-RPC 2.0 has a
// server answer a batch with an array of responses, none for notifications. So every element is
// answered Invalid Request (-32600) with its own id (null when it has none that can be read) and
// none is run; notifications are left out, and a batch of notifications only is answered 204. An
// empty array is a single Invalid Request, as JSON-RPC 2.0 prescribes.
func (s *Server) batch(w http.ResponseWriter, body []byte, call *tasks.Call) {
	var elems []json.RawMessage
	if err := json.Unmarshal(body, &elems); err != nil {
		writeError(w, http.StatusOK, nil, call, fmt.Errorf("%w: %w", a2a.ErrParseError, err))
		return
	}
	if len(elems) == 0 {
		writeError(w, http.StatusOK, nil, call, fmt.Errorf("an empty batch: %w", a2a.ErrInvalidRequest))
		return
	}
	call.SetOutcome(tasks.Outcome(a2a.ErrInvalidRequest))
	var answers []rpcResponse
	for _, el := range elems {
		req, err := parseEnvelope(el)
		if err == nil && req.notification() {
			continue
		}
		if err == nil {
			err = fmt.Errorf("batch requests are not supported: send one JSON-RPC request per HTTP request: %w", a2a.ErrInvalidRequest)
		}
		answers = append(answers, errorResponse(req.ID, errorObject(err)))
	}
	if len(answers) == 0 {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_ = json.NewEncoder(w).Encode(answers)
}

// request is a checked JSON-RPC request as the SDK reads it.
type request struct {
	JSONRPC string          `json:"jsonrpc"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
	ID      json.RawMessage `json:"id,omitempty"`
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
	writeRPCError(w, status, id, errorObject(err))
}

// errorObject is the JSON-RPC error of err: the code of the A2A error it wraps, its message, and
// err's own words as data.
func errorObject(err error) rpcError {
	for _, c := range errorCodes {
		if errors.Is(err, c.err) {
			return rpcError{Code: c.code, Message: c.err.Error(), Data: map[string]any{"error": err.Error()}}
		}
	}
	return rpcError{Code: -32603, Message: a2a.ErrInternalError.Error()}
}

// rpcResponse is a JSON-RPC error response.
type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   rpcError        `json:"error"`
}

// errorResponse is the error response of request id (null when absent).
func errorResponse(id json.RawMessage, e rpcError) rpcResponse {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	return rpcResponse{JSONRPC: "2.0", ID: id, Error: e}
}

// writeRPCError writes a JSON-RPC error response of request id (null when absent) with status.
func writeRPCError(w http.ResponseWriter, status int, id json.RawMessage, e rpcError) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(errorResponse(id, e))
}

// writeRefusal answers a request the key check turned away: its status with the challenge of a
// 401 or the Retry-After of a 429/503, and a JSON-RPC server error (-32000) with id null, as
// nothing of the request was read.
func writeRefusal(w http.ResponseWriter, no *refusal) {
	no.setHeaders(w)
	msg := "unauthenticated"
	if no.status != http.StatusUnauthorized {
		msg = "unavailable, retry later"
	}
	w.Header().Set("Cache-Control", "no-store")
	writeRPCError(w, no.status, nil, rpcError{Code: -32000, Message: msg, Data: map[string]any{"error": no.detail}})
}
