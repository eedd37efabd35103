package rpc

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/turnstile-run/turnstile/pkg/a2apb"
	"github.com/turnstile-run/turnstile/pkg/a2atask"
	"github.com/turnstile-run/turnstile/services/a2a/internal/tasks"
)

// Protocol 1.0 runs on the same handler as 0.3: each method's request (a2apb, decoded by the proto
// JSON mapping) is turned into the 0.3 params the handler takes, and its answer back into 1.0.
// Both bindings (JSON-RPC on Path, HTTP+JSON under RESTPath) share these.

// v1Method is one protocol 1.0 method.
type v1Method struct {
	// legacy is the 0.3 method it runs as (the requests metric's label, the region check's
	// method).
	legacy string
	// newReq returns an empty request message.
	newReq func() proto.Message
	// unary answers a request that is not a stream.
	unary func(context.Context, *tasks.Handler, proto.Message) (proto.Message, error)
	// stream answers a streaming request.
	stream func(context.Context, *tasks.Handler, proto.Message) iter.Seq2[a2a.Event, error]
}

var v1Methods = map[string]v1Method{
	"SendMessage": {
		legacy: "message/send", newReq: func() proto.Message { return &a2apb.SendMessageRequest{} },
		unary: func(ctx context.Context, h *tasks.Handler, m proto.Message) (proto.Message, error) {
			p, err := v1Send(m.(*a2apb.SendMessageRequest))
			if err != nil {
				return nil, err
			}
			res, err := h.OnSendMessage(ctx, p)
			if err != nil {
				return nil, err
			}
			switch res := res.(type) {
			case *a2a.Task:
				return &a2apb.SendMessageResponse{Payload: &a2apb.SendMessageResponse_Task{Task: a2atask.V1Task(res)}}, nil
			case *a2a.Message:
				return &a2apb.SendMessageResponse{Payload: &a2apb.SendMessageResponse_Message{Message: a2atask.V1Message(res)}}, nil
			}
			return nil, fmt.Errorf("send answered %T: %w", res, a2a.ErrInternalError)
		},
	},
	"SendStreamingMessage": {
		legacy: "message/stream", newReq: func() proto.Message { return &a2apb.SendMessageRequest{} },
		stream: func(ctx context.Context, h *tasks.Handler, m proto.Message) iter.Seq2[a2a.Event, error] {
			p, err := v1Send(m.(*a2apb.SendMessageRequest))
			if err != nil {
				return func(yield func(a2a.Event, error) bool) { yield(nil, err) }
			}
			return h.OnSendMessageStream(ctx, p)
		},
	},
	"GetTask": {
		legacy: "tasks/get", newReq: func() proto.Message { return &a2apb.GetTaskRequest{} },
		unary: func(ctx context.Context, h *tasks.Handler, m proto.Message) (proto.Message, error) {
			q := m.(*a2apb.GetTaskRequest)
			if q.GetId() == "" {
				return nil, fmt.Errorf("id is required: %w", a2a.ErrInvalidParams)
			}
			t, err := h.OnGetTask(ctx, &a2a.TaskQueryParams{ID: a2a.TaskID(q.GetId()), HistoryLength: intPtr(q.HistoryLength)})
			if err != nil {
				return nil, err
			}
			return a2atask.V1Task(t), nil
		},
	},
	"ListTasks": {
		legacy: "tasks/list", newReq: func() proto.Message { return &a2apb.ListTasksRequest{} },
		unary: func(ctx context.Context, h *tasks.Handler, m proto.Message) (proto.Message, error) {
			q := m.(*a2apb.ListTasksRequest)
			lq := tasks.ListQuery{
				ContextID: q.GetContextId(), State: a2atask.FromV1State(q.GetStatus()), PageToken: q.GetPageToken(),
				HistoryLength: intPtr(q.HistoryLength), IncludeArtifacts: q.GetIncludeArtifacts(),
			}
			if q.PageSize != nil {
				lq.PageSize = int(q.GetPageSize())
				if lq.PageSize == 0 {
					lq.PageSize = -1
				}
			}
			if q.StatusTimestampAfter != nil {
				at := q.GetStatusTimestampAfter().AsTime()
				lq.StatusAfter = &at
			}
			page, err := h.ListTasks(ctx, lq)
			if err != nil {
				return nil, err
			}
			out := &a2apb.ListTasksResponse{NextPageToken: page.NextPageToken, PageSize: int32(page.PageSize), Tasks: []*a2apb.Task{}}
			for _, t := range page.Tasks {
				out.Tasks = append(out.Tasks, a2atask.V1Task(t))
			}
			out.TotalSize = int32(len(out.Tasks))
			return out, nil
		},
	},
	"CancelTask": {
		legacy: "tasks/cancel", newReq: func() proto.Message { return &a2apb.CancelTaskRequest{} },
		unary: func(ctx context.Context, h *tasks.Handler, m proto.Message) (proto.Message, error) {
			q := m.(*a2apb.CancelTaskRequest)
			if q.GetId() == "" {
				return nil, fmt.Errorf("id is required: %w", a2a.ErrInvalidParams)
			}
			t, err := h.OnCancelTask(ctx, &a2a.TaskIDParams{ID: a2a.TaskID(q.GetId())})
			if err != nil {
				return nil, err
			}
			return a2atask.V1Task(t), nil
		},
	},
	"SubscribeToTask": {
		legacy: "tasks/resubscribe", newReq: func() proto.Message { return &a2apb.SubscribeToTaskRequest{} },
		stream: func(ctx context.Context, h *tasks.Handler, m proto.Message) iter.Seq2[a2a.Event, error] {
			q := m.(*a2apb.SubscribeToTaskRequest)
			if q.GetId() == "" {
				return func(yield func(a2a.Event, error) bool) {
					yield(nil, fmt.Errorf("id is required: %w", a2a.ErrInvalidParams))
				}
			}
			return h.OnResubscribeToTask(ctx, &a2a.TaskIDParams{ID: a2a.TaskID(q.GetId())})
		},
	},
	"CreateTaskPushNotificationConfig": {
		legacy: "tasks/pushNotificationConfig/set", newReq: func() proto.Message { return &a2apb.TaskPushNotificationConfig{} },
		unary: func(ctx context.Context, h *tasks.Handler, m proto.Message) (proto.Message, error) {
			q := m.(*a2apb.TaskPushNotificationConfig)
			if q.GetTaskId() == "" {
				return nil, fmt.Errorf("taskId is required: %w", a2a.ErrInvalidParams)
			}
			c, err := h.OnSetTaskPushConfig(ctx, &a2a.TaskPushConfig{TaskID: a2a.TaskID(q.GetTaskId()), Config: a2atask.FromV1PushConfig(q)})
			if err != nil {
				return nil, err
			}
			return a2atask.V1PushConfig(c), nil
		},
	},
	"GetTaskPushNotificationConfig": {
		legacy: "tasks/pushNotificationConfig/get", newReq: func() proto.Message { return &a2apb.GetTaskPushNotificationConfigRequest{} },
		unary: func(ctx context.Context, h *tasks.Handler, m proto.Message) (proto.Message, error) {
			q := m.(*a2apb.GetTaskPushNotificationConfigRequest)
			if q.GetTaskId() == "" {
				return nil, fmt.Errorf("taskId is required: %w", a2a.ErrInvalidParams)
			}
			c, err := h.OnGetTaskPushConfig(ctx, &a2a.GetTaskPushConfigParams{TaskID: a2a.TaskID(q.GetTaskId()), ConfigID: q.GetId()})
			if err != nil {
				return nil, err
			}
			return a2atask.V1PushConfig(c), nil
		},
	},
	"ListTaskPushNotificationConfigs": {
		legacy: "tasks/pushNotificationConfig/list", newReq: func() proto.Message { return &a2apb.ListTaskPushNotificationConfigsRequest{} },
		unary: func(ctx context.Context, h *tasks.Handler, m proto.Message) (proto.Message, error) {
			q := m.(*a2apb.ListTaskPushNotificationConfigsRequest)
			if q.GetTaskId() == "" {
				return nil, fmt.Errorf("taskId is required: %w", a2a.ErrInvalidParams)
			}
			cs, err := h.OnListTaskPushConfig(ctx, &a2a.ListTaskPushConfigParams{TaskID: a2a.TaskID(q.GetTaskId())})
			if err != nil {
				return nil, err
			}
			out := &a2apb.ListTaskPushNotificationConfigsResponse{Configs: []*a2apb.TaskPushNotificationConfig{}}
			for _, c := range cs {
				out.Configs = append(out.Configs, a2atask.V1PushConfig(c))
			}
			return out, nil
		},
	},
	"DeleteTaskPushNotificationConfig": {
		legacy: "tasks/pushNotificationConfig/delete", newReq: func() proto.Message { return &a2apb.DeleteTaskPushNotificationConfigRequest{} },
		unary: func(ctx context.Context, h *tasks.Handler, m proto.Message) (proto.Message, error) {
			q := m.(*a2apb.DeleteTaskPushNotificationConfigRequest)
			if q.GetTaskId() == "" || q.GetId() == "" {
				return nil, fmt.Errorf("taskId and id are required: %w", a2a.ErrInvalidParams)
			}
			if err := h.OnDeleteTaskPushConfig(ctx, &a2a.DeleteTaskPushConfigParams{TaskID: a2a.TaskID(q.GetTaskId()), ConfigID: q.GetId()}); err != nil {
				return nil, err
			}
			return &emptypb.Empty{}, nil
		},
	},
	"GetExtendedAgentCard": {
		legacy: "agent/getAuthenticatedExtendedCard", newReq: func() proto.Message { return &a2apb.GetExtendedAgentCardRequest{} },
		unary: func(ctx context.Context, h *tasks.Handler, _ proto.Message) (proto.Message, error) {
			_, err := h.OnGetExtendedAgentCard(ctx)
			if err == nil {
				err = a2a.ErrAuthenticatedExtendedCardNotConfigured
			}
			return nil, err
		},
	},
}

// v1Send is a 1.0 SendMessageRequest as 0.3's message/send params: returnImmediately is
// blocking false, the task push config is the message's push config.
func v1Send(q *a2apb.SendMessageRequest) (*a2a.MessageSendParams, error) {
	m, err := a2atask.FromV1Message(q.GetMessage())
	if err != nil {
		return nil, fmt.Errorf("message.%w: %w", err, a2a.ErrInvalidParams)
	}
	if m == nil {
		return nil, fmt.Errorf("message is required: %w", a2a.ErrInvalidParams)
	}
	p := &a2a.MessageSendParams{Message: m}
	if q.GetMetadata() != nil {
		p.Metadata = q.GetMetadata().AsMap()
	}
	if c := q.GetConfiguration(); c != nil {
		blocking := !c.GetReturnImmediately()
		p.Config = &a2a.MessageSendConfig{AcceptedOutputModes: c.GetAcceptedOutputModes(), Blocking: &blocking, HistoryLength: intPtr(c.HistoryLength)}
		if pc := c.GetTaskPushNotificationConfig(); pc != nil {
			cfg := a2atask.FromV1PushConfig(pc)
			p.Config.PushConfig = &cfg
		}
	}
	return p, nil
}

func intPtr(v *int32) *int {
	if v == nil {
		return nil
	}
	n := int(*v)
	return &n
}

// V1 is the protocol version 1.0 (A2A-Version "1.0", or "1.0.x": Major.Minor decides).
const V1 = "1.0"

// version is the protocol a request asks for by its A2A-Version header or query parameter: "0.3"
// when it names none (as the specification says), else its Major.Minor, which must be 0.3 or 1.0.
func version(header, query, absent string) (string, error) {
	v := strings.TrimSpace(header)
	if v == "" {
		v = strings.TrimSpace(query)
	}
	if v == "" {
		return absent, nil
	}
	parts := strings.SplitN(v, ".", 3)
	if len(parts) >= 2 {
		switch mm := parts[0] + "." + parts[1]; mm {
		case "0.3", V1:
			return mm, nil
		}
	}
	return "", fmt.Errorf("A2A-Version %q: this agent speaks 0.3 and 1.0: %w", v, tasks.ErrVersionNotSupported)
}

// v1Error is how an A2A error reads in 1.0: its JSON-RPC code, HTTP status, google.rpc status
// name and ErrorInfo reason (A2A 1.0, section 5.4).
type v1Error struct {
	err    error
	code   int
	status int
	grpc   string
	reason string
}

var v1Errors = []v1Error{
	{a2a.ErrParseError, -32700, 400, "INVALID_ARGUMENT", ""},
	{a2a.ErrInvalidRequest, -32600, 400, "INVALID_ARGUMENT", ""},
	{a2a.ErrMethodNotFound, -32601, 404, "NOT_FOUND", ""},
	{a2a.ErrInvalidParams, -32602, 400, "INVALID_ARGUMENT", ""},
	{a2a.ErrTaskNotFound, -32001, 404, "NOT_FOUND", "TASK_NOT_FOUND"},
	{a2a.ErrTaskNotCancelable, -32002, 400, "FAILED_PRECONDITION", "TASK_NOT_CANCELABLE"},
	{a2a.ErrPushNotificationNotSupported, -32003, 400, "FAILED_PRECONDITION", "PUSH_NOTIFICATION_NOT_SUPPORTED"},
	{a2a.ErrUnsupportedOperation, -32004, 400, "FAILED_PRECONDITION", "UNSUPPORTED_OPERATION"},
	{a2a.ErrUnsupportedContentType, -32005, 400, "INVALID_ARGUMENT", "CONTENT_TYPE_NOT_SUPPORTED"},
	{a2a.ErrInvalidAgentResponse, -32006, 500, "INTERNAL", "INVALID_AGENT_RESPONSE"},
	{a2a.ErrAuthenticatedExtendedCardNotConfigured, -32007, 400, "FAILED_PRECONDITION", "EXTENDED_AGENT_CARD_NOT_CONFIGURED"},
	{tasks.ErrVersionNotSupported, tasks.VersionNotSupportedCode, 400, "FAILED_PRECONDITION", "VERSION_NOT_SUPPORTED"},
	{a2a.ErrServerError, -32000, 503, "UNAVAILABLE", ""},
}

// v1ErrorOf is the 1.0 form of err (internal error for one that wraps no A2A error).
func v1ErrorOf(err error) v1Error {
	for _, e := range v1Errors {
		if errors.Is(err, e.err) {
			return e
		}
	}
	return v1Error{err: a2a.ErrInternalError, code: -32603, status: 500, grpc: "INTERNAL"}
}

// details are the error's google.rpc details: its ErrorInfo (when it is an A2A error) carrying
// err's own words and the time.
func (e v1Error) details(err error) []any {
	md := map[string]any{"error": err.Error(), "timestamp": time.Now().UTC().Format(time.RFC3339Nano)}
	if e.reason == "" {
		return []any{map[string]any{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": e.grpc, "domain": "a2a-protocol.org", "metadata": md}}
	}
	return []any{map[string]any{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": e.reason, "domain": "a2a-protocol.org", "metadata": md}}
}
