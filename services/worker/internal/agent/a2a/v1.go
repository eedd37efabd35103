package a2a

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"mime"
	"net/http"
	"strings"
	"sync/atomic"

	sdk "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"google.golang.org/protobuf/proto"

	"github.com/turnstile-run/turnstile/pkg/a2apb"
	"github.com/turnstile-run/turnstile/pkg/a2atask"
)

// conn is how the agent talks to one endpoint: protocol 0.3 through the SDK's client, or 1.0
// through v1Conn. Both hand the stream's events over in 0.3's types, so one loop relays them.
type conn interface {
	// stream sends the message and yields the task's events.
	stream(ctx context.Context, p *sdk.MessageSendParams) iter.Seq2[sdk.Event, error]
	// cancel asks the remote agent to cancel a task.
	cancel(ctx context.Context, id sdk.TaskID) error
	// protocol is the version spoken ("0.3" or "1.0").
	protocol() string
	close() error
}

// v03Conn is protocol 0.3 through a2a-go's JSON-RPC client.
type v03Conn struct{ c *a2aclient.Client }

func (c v03Conn) stream(ctx context.Context, p *sdk.MessageSendParams) iter.Seq2[sdk.Event, error] {
	return c.c.SendStreamingMessage(ctx, p)
}

func (c v03Conn) cancel(ctx context.Context, id sdk.TaskID) error {
	_, err := c.c.CancelTask(ctx, &sdk.TaskIDParams{ID: id})
	return err
}

func (v03Conn) protocol() string { return Protocol03 }
func (c v03Conn) close() error   { return c.c.Destroy() }

// v1Conn is protocol 1.0's JSON-RPC binding (A2A-Version: 1.0, PascalCase methods, the proto JSON
// mapping of package a2apb). No maintained Go client of 1.0 is available, so the requests and
// answers are the types generated from the specification's proto, and each stream event is
// turned into 0.3's by package a2atask (FromV1Event), as turnstile's own front door turns 0.3's
// into 1.0's.
type v1Conn struct {
	url string
	hc  *http.Client
	ids atomic.Int64
}

func (*v1Conn) protocol() string { return Protocol10 }
func (c *v1Conn) close() error   { c.hc.CloseIdleConnections(); return nil }

// rpcError is a JSON-RPC error an agent answered. It unwraps to a2a-go's error of the same code
// (task not found, not cancelable, ...), so callers branch on the SDK's sentinels whichever
// version was spoken.
type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *rpcError) Error() string { return fmt.Sprintf("%s (%d)", e.Message, e.Code) }

func (e *rpcError) Unwrap() error { return v1Codes[e.Code] }

// v1Codes are the A2A errors by their JSON-RPC code (A2A 1.0, section 5.4).
var v1Codes = map[int]error{
	-32700: sdk.ErrParseError, -32600: sdk.ErrInvalidRequest, -32601: sdk.ErrMethodNotFound,
	-32602: sdk.ErrInvalidParams, -32603: sdk.ErrInternalError, -32000: sdk.ErrServerError,
	-32001: sdk.ErrTaskNotFound, -32002: sdk.ErrTaskNotCancelable, -32003: sdk.ErrPushNotificationNotSupported,
	-32004: sdk.ErrUnsupportedOperation, -32005: sdk.ErrUnsupportedContentType, -32006: sdk.ErrInvalidAgentResponse,
	-32007: sdk.ErrAuthenticatedExtendedCardNotConfigured,
}

// response is one JSON-RPC response: a plain answer, or one event of a stream.
type response struct {
	Result json.RawMessage `json:"result"`
	Error  *rpcError       `json:"error"`
}

// call posts one 1.0 request; the answer is returned open (the caller reads and closes it).
// statusTransport has turned an HTTP error status into upstream.StatusError already.
func (c *v1Conn) call(ctx context.Context, method string, params proto.Message, accept string) (*http.Response, error) {
	p, err := a2apb.MarshalJSON(params)
	if err != nil {
		return nil, fmt.Errorf("a2a %s: encode params: %w", method, err)
	}
	body, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      int64           `json:"id"`
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params"`
	}{"2.0", c.ids.Add(1), method, p})
	if err != nil {
		return nil, fmt.Errorf("a2a %s: encode request: %w", method, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("a2a %s: %w", method, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", accept)
	req.Header.Set(VersionHeader, Protocol10)
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("a2a %s: %w", method, err)
	}
	return resp, nil
}

// maxAnswer bounds a plain answer and one event of a stream.
const maxAnswer = 16 << 20

// decode reads one JSON-RPC response into out (nil: the result is not needed).
func decode(raw []byte, out proto.Message) error {
	var r response
	if err := json.Unmarshal(raw, &r); err != nil {
		return fmt.Errorf("not a JSON-RPC response: %w: %w", err, sdk.ErrInvalidAgentResponse)
	}
	if r.Error != nil {
		return r.Error
	}
	if out == nil {
		return nil
	}
	if len(r.Result) == 0 {
		return fmt.Errorf("a JSON-RPC response without result: %w", sdk.ErrInvalidAgentResponse)
	}
	if err := a2apb.UnmarshalJSON(r.Result, out); err != nil {
		return fmt.Errorf("result is not %s: %w: %w", out.ProtoReflect().Descriptor().Name(), err, sdk.ErrInvalidAgentResponse)
	}
	return nil
}

func (c *v1Conn) stream(ctx context.Context, p *sdk.MessageSendParams) iter.Seq2[sdk.Event, error] {
	return func(yield func(sdk.Event, error) bool) {
		fail := func(err error) { yield(nil, fmt.Errorf("SendStreamingMessage: %w", err)) }
		resp, err := c.call(ctx, "SendStreamingMessage", &a2apb.SendMessageRequest{Message: a2atask.V1Message(p.Message)}, "text/event-stream")
		if err != nil {
			yield(nil, err)
			return
		}
		defer func() { _ = resp.Body.Close() }()
		if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
			// An answer that is not a stream: the request's error (or a plain result, which a
			// streaming request must not get).
			raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
			if err != nil {
				fail(err)
				return
			}
			if err := decode(raw, nil); err != nil {
				fail(err)
				return
			}
			fail(fmt.Errorf("the answer is %q, not an event stream: %w", mt, sdk.ErrInvalidAgentResponse))
			return
		}
		for data, err := range events(resp.Body) {
			if err != nil {
				fail(err)
				return
			}
			var sr a2apb.StreamResponse
			if err := decode(data, &sr); err != nil {
				fail(err)
				return
			}
			ev, err := a2atask.FromV1Event(&sr)
			if err != nil {
				fail(fmt.Errorf("%w: %w", err, sdk.ErrInvalidAgentResponse))
				return
			}
			if !yield(ev, nil) {
				return
			}
		}
	}
}

func (c *v1Conn) cancel(ctx context.Context, id sdk.TaskID) error {
	resp, err := c.call(ctx, "CancelTask", &a2apb.CancelTaskRequest{Id: string(id)}, "application/json")
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return fmt.Errorf("a2a CancelTask: %w", err)
	}
	if err := decode(raw, &a2apb.Task{}); err != nil {
		return fmt.Errorf("a2a CancelTask: %w", err)
	}
	return nil
}

// events yields the data of each event of an SSE stream (data lines joined by newlines; comments,
// ids and event names skipped). It ends at the stream's end; a read error, or an event over
// maxAnswer, is yielded as an error.
func events(r io.Reader) iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 0, 64<<10), maxAnswer)
		var data []byte
		has := false
		for sc.Scan() {
			line := sc.Text()
			if line == "" {
				if has && !yield(data, nil) {
					return
				}
				data, has = nil, false
				continue
			}
			field, value, _ := strings.Cut(line, ":")
			if field != "data" {
				continue
			}
			value = strings.TrimPrefix(value, " ")
			if has {
				data = append(data, '\n')
			}
			data, has = append(data, value...), true
		}
		// An event the stream's end cut short is not dispatched (as an EventSource drops it).
		if err := sc.Err(); err != nil {
			yield(nil, err)
		}
	}
}
