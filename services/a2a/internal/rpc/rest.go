package rpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/turnstile-run/turnstile/pkg/a2apb"
	"github.com/turnstile-run/turnstile/pkg/region"
	"github.com/turnstile-run/turnstile/services/a2a/internal/tasks"
)

// RESTPath is where the HTTP+JSON binding (A2A 1.0, section 11) is mounted: its routes
// (POST /message:send, GET /tasks/{id}, POST /tasks/{id}:cancel, ...) are under it, and it is
// the URL the Agent Card names for the binding.
const RESTPath = Path + "/rest"

// restV1 is the 1.0 HTTP+JSON binding: messages in the proto JSON mapping, errors as
// google.rpc.Status with an ErrorInfo of the A2A error (section 11.6).
type restV1 struct{}

func (restV1) contentType() string { return "application/a2a+json" }

func (restV1) result(m proto.Message) ([]byte, error) {
	b, err := a2apb.MarshalJSON(m)
	return append(b, '\n'), err
}

// status is the google.rpc.Status body of err.
func (restV1) status(err error) (int, []byte) {
	e := v1ErrorOf(err)
	b, _ := json.Marshal(map[string]any{"error": map[string]any{
		"code": e.status, "status": e.grpc, "message": err.Error(), "details": e.details(err),
	}})
	return e.status, append(b, '\n')
}

func (b restV1) failure(err error) (int, []byte) { return b.status(err) }

func (restV1) event(m *a2apb.StreamResponse) ([]byte, error) {
	p, err := a2apb.MarshalJSON(m)
	if err != nil {
		return nil, err
	}
	return append(append([]byte("data: "), p...), '\n', '\n'), nil
}

func (b restV1) streamFailure(err error) []byte {
	_, p := b.status(err)
	return append(append([]byte("event: error\ndata: "), bytes.TrimSpace(p)...), '\n', '\n')
}

// REST returns the HTTP+JSON binding's handler for the routes under base (RESTPath for the
// default agent): the same checks as the JSON-RPC endpoint (CORS preflight, then the key before
// anything of the request is read), then the route's 1.0 method.
func (s *Server) REST(base string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.serveREST(w, r, base) })
}

func (s *Server) serveREST(w http.ResponseWriter, r *http.Request, base string) {
	method := "unknown"
	call := newCall(r)
	defer func() { s.requests.WithLabelValues(method, call.Outcome()).Inc() }()
	if !s.admit(w, r, call, s.restCORS, writeRESTRefusal) {
		return
	}
	b := restV1{}
	fail := func(err error) {
		call.SetOutcome(tasks.Outcome(err))
		status, body := b.failure(err)
		w.Header().Set("Content-Type", b.contentType())
		w.WriteHeader(status)
		_, _ = w.Write(body) //nolint:gosec // a google.rpc.Status JSON body, served as application/a2a+json
	}
	// The binding is 1.0's: a request naming no version is taken as 1.0 (0.3's REST binding is
	// not served; 0.3 clients use JSON-RPC).
	if v, err := version(r.Header.Get("A2A-Version"), r.URL.Query().Get("A2A-Version"), V1); err != nil || v != V1 {
		if err == nil {
			err = fmt.Errorf("A2A-Version %s: this binding speaks 1.0; protocol 0.3 is served over JSON-RPC at %s: %w", v, Path, tasks.ErrVersionNotSupported)
		}
		fail(err)
		return
	}
	call.Version = V1
	name, in, err := s.restRequest(w, r, strings.TrimPrefix(r.URL.EscapedPath(), base))
	if err != nil {
		var wrong *wrongMethod
		if errors.As(err, &wrong) {
			w.Header().Set("Allow", wrong.allow)
			call.SetOutcome("method_not_allowed")
			_, body := b.status(err)
			w.Header().Set("Content-Type", b.contentType())
			w.WriteHeader(http.StatusMethodNotAllowed)
			_, _ = w.Write(body) //nolint:gosec // a google.rpc.Status JSON body, served as application/a2a+json
			return
		}
		fail(err)
		return
	}
	m := v1Methods[name]
	method = m.legacy
	if owner, ok := s.restMisdirected(m, in); ok {
		call.SetOutcome("misdirected")
		e := fmt.Errorf("misdirected: this task belongs to region %s", owner)
		body, _ := json.Marshal(map[string]any{"error": map[string]any{
			"code": http.StatusMisdirectedRequest, "status": "FAILED_PRECONDITION", "message": e.Error(),
			"details": []any{map[string]any{
				"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "MISDIRECTED",
				"domain": "turnstile.run", "metadata": map[string]any{region.MemberRegion: owner},
			}},
		}})
		w.Header().Set("Content-Type", b.contentType())
		w.WriteHeader(http.StatusMisdirectedRequest)
		_, _ = w.Write(append(body, '\n'))
		return
	}
	s.run(w, r, call, m, in, b)
}

// restMisdirected reports whether a REST request names another region's task or context.
func (s *Server) restMisdirected(m v1Method, in proto.Message) (string, bool) {
	p, err := a2apb.MarshalJSON(in)
	if err != nil {
		return "", false
	}
	return misdirected(s.cfg.Region, m.legacy, p)
}

// wrongMethod is a route asked with an HTTP method it does not take.
type wrongMethod struct{ allow string }

func (e *wrongMethod) Error() string {
	return "this route takes " + e.allow + ": " + a2a.ErrMethodNotFound.Error()
}

func (e *wrongMethod) Unwrap() error { return a2a.ErrMethodNotFound }

// restRequest maps a route (the path under the binding's base) to its 1.0 method and request.
func (s *Server) restRequest(w http.ResponseWriter, r *http.Request, path string) (string, proto.Message, error) {
	allow := func(methods ...string) error {
		for _, m := range methods {
			if r.Method == m {
				return nil
			}
		}
		return &wrongMethod{allow: strings.Join(methods, ", ")}
	}
	segs := strings.Split(strings.Trim(path, "/"), "/")
	for i, sg := range segs {
		u, err := url.PathUnescape(sg)
		if err != nil {
			return "", nil, fmt.Errorf("path segment %q: %w", sg, a2a.ErrInvalidRequest)
		}
		segs[i] = u
	}
	q := r.URL.Query()
	switch {
	case len(segs) == 1 && (segs[0] == "message:send" || segs[0] == "message:stream"):
		if err := allow(http.MethodPost); err != nil {
			return "", nil, err
		}
		in := &a2apb.SendMessageRequest{}
		if err := s.restBody(w, r, in, true); err != nil {
			return "", nil, err
		}
		if segs[0] == "message:send" {
			return "SendMessage", in, nil
		}
		return "SendStreamingMessage", in, nil
	case len(segs) == 1 && segs[0] == "extendedAgentCard":
		return "GetExtendedAgentCard", &a2apb.GetExtendedAgentCardRequest{}, allow(http.MethodGet)
	case len(segs) == 1 && segs[0] == "tasks":
		if err := allow(http.MethodGet); err != nil {
			return "", nil, err
		}
		in, err := listQuery(q)
		return "ListTasks", in, err
	case len(segs) == 2 && segs[0] == "tasks":
		id := segs[1]
		switch {
		case strings.HasSuffix(id, ":cancel"):
			if err := allow(http.MethodPost); err != nil {
				return "", nil, err
			}
			in := &a2apb.CancelTaskRequest{}
			if err := s.restBody(w, r, in, false); err != nil {
				return "", nil, err
			}
			in.Id = strings.TrimSuffix(id, ":cancel")
			return "CancelTask", in, nil
		case strings.HasSuffix(id, ":subscribe"):
			// The proto's route is GET; clients (@a2a-js/sdk) POST it.
			return "SubscribeToTask", &a2apb.SubscribeToTaskRequest{Id: strings.TrimSuffix(id, ":subscribe")}, allow(http.MethodGet, http.MethodPost)
		}
		if err := allow(http.MethodGet); err != nil {
			return "", nil, err
		}
		in := &a2apb.GetTaskRequest{Id: id}
		n, err := queryInt(q, "historyLength")
		in.HistoryLength = n
		return "GetTask", in, err
	case len(segs) == 3 && segs[0] == "tasks" && segs[2] == "pushNotificationConfigs":
		if err := allow(http.MethodPost, http.MethodGet); err != nil {
			return "", nil, err
		}
		if r.Method == http.MethodGet {
			return "ListTaskPushNotificationConfigs", &a2apb.ListTaskPushNotificationConfigsRequest{TaskId: segs[1]}, nil
		}
		in := &a2apb.TaskPushNotificationConfig{}
		if err := s.restBody(w, r, in, true); err != nil {
			return "", nil, err
		}
		in.TaskId = segs[1]
		return "CreateTaskPushNotificationConfig", in, nil
	case len(segs) == 4 && segs[0] == "tasks" && segs[2] == "pushNotificationConfigs":
		if err := allow(http.MethodGet, http.MethodDelete); err != nil {
			return "", nil, err
		}
		if r.Method == http.MethodDelete {
			return "DeleteTaskPushNotificationConfig", &a2apb.DeleteTaskPushNotificationConfigRequest{TaskId: segs[1], Id: segs[3]}, nil
		}
		return "GetTaskPushNotificationConfig", &a2apb.GetTaskPushNotificationConfigRequest{TaskId: segs[1], Id: segs[3]}, nil
	}
	return "", nil, fmt.Errorf("%s %s is no route of the A2A 1.0 HTTP+JSON binding: %w", r.Method, path, a2a.ErrMethodNotFound)
}

// restBody decodes the request body into in by the proto JSON mapping; an empty body is an
// empty request unless required.
func (s *Server) restBody(w http.ResponseWriter, r *http.Request, in proto.Message, required bool) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBody))
	if err != nil {
		return fmt.Errorf("read body (at most %d bytes): %w", s.cfg.MaxBody, a2a.ErrInvalidRequest)
	}
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		if required {
			return fmt.Errorf("a JSON body is required: %w", a2a.ErrInvalidParams)
		}
		return nil
	}
	if !json.Valid(body) {
		return fmt.Errorf("the body is not JSON: %w", a2a.ErrParseError)
	}
	if name := duplicateMember(body); name != "" {
		return fmt.Errorf("the body has the member %q twice: %w", name, a2a.ErrInvalidParams)
	}
	if err := a2apb.UnmarshalJSON(body, in); err != nil {
		return fmt.Errorf("the body is not %s: %w: %w", in.ProtoReflect().Descriptor().Name(), err, a2a.ErrInvalidParams)
	}
	return nil
}

// listQuery is GET /tasks' query as a ListTasksRequest.
func listQuery(q url.Values) (*a2apb.ListTasksRequest, error) {
	in := &a2apb.ListTasksRequest{ContextId: q.Get("contextId"), PageToken: q.Get("pageToken")}
	var err error
	if in.PageSize, err = queryInt(q, "pageSize"); err != nil {
		return nil, err
	}
	if in.HistoryLength, err = queryInt(q, "historyLength"); err != nil {
		return nil, err
	}
	if v := q.Get("status"); v != "" {
		n, ok := a2apb.TaskState_value[v]
		if !ok {
			return nil, fmt.Errorf("status %q is no TaskState: %w", v, a2a.ErrInvalidParams)
		}
		in.Status = a2apb.TaskState(n)
	}
	if v := q.Get("statusTimestampAfter"); v != "" {
		at, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return nil, fmt.Errorf("statusTimestampAfter is not an RFC 3339 time: %w", a2a.ErrInvalidParams)
		}
		in.StatusTimestampAfter = timestamppb.New(at)
	}
	if v := q.Get("includeArtifacts"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("includeArtifacts must be true or false: %w", a2a.ErrInvalidParams)
		}
		in.IncludeArtifacts = &b
	}
	return in, nil
}

func queryInt(q url.Values, name string) (*int32, error) {
	v := q.Get(name)
	if v == "" {
		return nil, nil
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("%s must be an integer: %w", name, a2a.ErrInvalidParams)
	}
	n32 := int32(n)
	return &n32, nil
}

// writeRESTRefusal answers a request the key check turned away, on the REST binding: its status
// with the challenge of a 401 or the Retry-After of a 429/503, and a google.rpc.Status body.
func writeRESTRefusal(w http.ResponseWriter, no *refusal) {
	no.setHeaders(w)
	status, msg := "UNAUTHENTICATED", "unauthenticated"
	if no.status != http.StatusUnauthorized {
		status, msg = "UNAVAILABLE", "unavailable, retry later"
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Type", "application/a2a+json")
	w.WriteHeader(no.status)
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": no.status, "status": status, "message": msg + ": " + no.detail}})
	_, _ = w.Write(append(b, '\n'))
}
