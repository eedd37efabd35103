package rpc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/a2aproject/a2a-go/a2a"
	"google.golang.org/protobuf/proto"

	"github.com/turnstile-run/turnstile/pkg/a2apb"
	"github.com/turnstile-run/turnstile/pkg/a2atask"
	"github.com/turnstile-run/turnstile/services/a2a/internal/tasks"
)

// binding writes the answers of one 1.0 binding (JSON-RPC or HTTP+JSON).
type binding interface {
	// contentType of a plain answer.
	contentType() string
	// result is the body of a successful plain answer.
	result(proto.Message) ([]byte, error)
	// failure is the HTTP status and body of a failed plain answer.
	failure(error) (int, []byte)
	// event is one SSE event carrying a stream's message.
	event(*a2apb.StreamResponse) ([]byte, error)
	// streamFailure is the SSE event ending a stream with an error.
	streamFailure(error) []byte
}

// run answers one checked 1.0 request in through b: a plain answer, or an SSE stream of its
// events. Like the SDK under 0.3, it writes through the writer, so a refusal the handler asks
// for is still an HTTP 429/503 until something was written, events carry the call's SSE ids
// and streams their keep-alives.
func (s *Server) run(w http.ResponseWriter, r *http.Request, call *tasks.Call, m v1Method, in proto.Message, b binding) {
	ctx := tasks.WithCall(r.Context(), call)
	if m.stream == nil {
		rw := newWriter(w, call, false, s.cfg.KeepAlive, s.cfg.WriteTimeout)
		defer rw.finish(nil)
		out, err := m.unary(ctx, s.h, in)
		var body []byte
		status := http.StatusOK
		if err == nil {
			body, err = b.result(out)
		}
		if err != nil {
			call.SetOutcome(tasks.Outcome(err))
			status, body = b.failure(err)
		}
		rw.Header().Set("Content-Type", b.contentType())
		rw.WriteHeader(status)
		_, _ = rw.Write(body)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	rw := newWriter(w, call, true, s.cfg.KeepAlive, s.cfg.WriteTimeout)
	defer rw.finish(nil)
	for ev, err := range m.stream(ctx, s.h, in) {
		if err != nil {
			call.SetOutcome(tasks.Outcome(err))
			if !opened(call) {
				// Nothing of a stream was sent (its checks failed): a plain answer.
				h.Del("Cache-Control")
				h.Del("X-Accel-Buffering")
				h.Set("Content-Type", b.contentType())
				status, body := b.failure(err)
				rw.WriteHeader(status)
				_, _ = rw.Write(body)
				return
			}
			_, _ = rw.Write(b.streamFailure(err))
			return
		}
		msg, err := a2atask.V1Event(ev)
		var p []byte
		if err == nil {
			p, err = b.event(msg)
		}
		if err != nil {
			_, _ = rw.Write(b.streamFailure(fmt.Errorf("%w: %w", a2a.ErrInternalError, err)))
			return
		}
		if _, err := rw.Write(p); err != nil {
			return
		}
		rw.Flush()
	}
}

// opened reports whether the call's stream was opened (its checks passed; the writer then sends
// the stream's headers).
func opened(call *tasks.Call) bool {
	select {
	case <-call.Ready():
		return true
	default:
		return false
	}
}

// jsonrpcV1 is the 1.0 JSON-RPC binding of the request id.
type jsonrpcV1 struct{ id json.RawMessage }

func (jsonrpcV1) contentType() string { return "application/json" }

func (b jsonrpcV1) result(m proto.Message) ([]byte, error) {
	res, err := a2apb.MarshalJSON(m)
	if err != nil {
		return nil, err
	}
	return b.envelope("result", res), nil
}

func (b jsonrpcV1) envelope(member string, v json.RawMessage) []byte {
	id := b.id
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	var buf bytes.Buffer
	buf.WriteString(`{"jsonrpc":"2.0","id":`)
	buf.Write(id)
	buf.WriteString(`,"` + member + `":`)
	buf.Write(v)
	buf.WriteString("}\n")
	return buf.Bytes()
}

func (b jsonrpcV1) errorBody(err error) []byte {
	e := v1ErrorOf(err)
	obj, _ := json.Marshal(struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Data    []any  `json:"data"`
	}{e.code, e.err.Error(), e.details(err)})
	return b.envelope("error", obj)
}

func (b jsonrpcV1) failure(err error) (int, []byte) { return http.StatusOK, b.errorBody(err) }

func (b jsonrpcV1) event(m *a2apb.StreamResponse) ([]byte, error) {
	p, err := b.result(m)
	if err != nil {
		return nil, err
	}
	return append(append([]byte("data: "), bytes.TrimSpace(p)...), '\n', '\n'), nil
}

func (b jsonrpcV1) streamFailure(err error) []byte {
	return append(append([]byte("data: "), bytes.TrimSpace(b.errorBody(err))...), '\n', '\n')
}

// serveV1 answers a 1.0 JSON-RPC request whose envelope was checked: its method must be one of
// 1.0's, its params that method's request in the proto JSON mapping.
func (s *Server) serveV1(w http.ResponseWriter, r *http.Request, req envelope, call *tasks.Call) string {
	call.Version = V1
	b := jsonrpcV1{id: req.ID}
	m, ok := v1Methods[req.Method]
	fail := func(err error) {
		call.SetOutcome(tasks.Outcome(err))
		if req.notification() {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		status, body := b.failure(err)
		w.Header().Set("Content-Type", b.contentType())
		w.WriteHeader(status)
		_, _ = w.Write(body)
	}
	if !ok {
		fail(fmt.Errorf("%q is not a method of A2A 1.0: %w", req.Method, a2a.ErrMethodNotFound))
		return "unknown"
	}
	in := m.newReq()
	params := bytes.TrimSpace(req.Params)
	if len(params) == 0 || string(params) == "null" {
		params = []byte("{}")
	}
	if name := duplicateMember(params); name != "" {
		fail(fmt.Errorf("params have the member %q twice: %w", name, a2a.ErrInvalidParams))
		return m.legacy
	}
	if err := a2apb.UnmarshalJSON(params, in); err != nil {
		fail(fmt.Errorf("params are not %s: %w: %w", in.ProtoReflect().Descriptor().Name(), err, a2a.ErrInvalidParams))
		return m.legacy
	}
	if owner, ok := misdirected(s.cfg.Region, m.legacy, params); ok {
		if req.notification() {
			call.SetOutcome("misdirected")
			w.WriteHeader(http.StatusMisdirectedRequest)
			return m.legacy
		}
		writeMisdirected(w, req.ID, call, owner)
		return m.legacy
	}
	if req.notification() {
		s.notifyV1(w, r, req.Method, m, in, call)
		return m.legacy
	}
	s.run(w, r, call, m, in, b)
	return m.legacy
}

// notifyV1 runs a 1.0 notification as notify runs a 0.3 one: only what changes something, a
// message without waiting for its turn, and answers 204 (or the refusal's status) with no body.
func (s *Server) notifyV1(w http.ResponseWriter, r *http.Request, method string, m v1Method, in proto.Message, call *tasks.Call) {
	switch method {
	case "SendMessage", "SendStreamingMessage":
		q := in.(*a2apb.SendMessageRequest)
		if q.Configuration == nil {
			q.Configuration = &a2apb.SendMessageConfiguration{}
		}
		q.Configuration.ReturnImmediately = true
		m = v1Methods["SendMessage"]
	case "CancelTask", "CreateTaskPushNotificationConfig", "DeleteTaskPushNotificationConfig":
	default:
		w.WriteHeader(http.StatusNoContent)
		return
	}
	s.run(discard{h: http.Header{}}, r, call, m, in, jsonrpcV1{})
	s.answerNotification(w, call)
}
