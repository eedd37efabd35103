package tasks

import (
	"context"
	"sync"
	"time"

	"github.com/turnstile-run/turnstile/pkg/frontdoor"
)

// Call is what the HTTP layer (package rpc) knows of one JSON-RPC request and what the handler
// tells it back: the caller's credential and stream cursor in, the SSE ids of the events it yields
// and an HTTP refusal out. It is safe for concurrent use by the handler and the response writer.
type Call struct {
	// Credential is the Authorization header the caller sent, forwarded to the native API.
	Credential frontdoor.Credential
	// LastEventID is the Last-Event-ID header of a tasks/resubscribe.
	LastEventID string
	// Deadline is the caller's X-Deadline-Epoch-Ms header, passed on as the turn's deadline.
	Deadline string
	// Agent is the catalog's agent the endpoint serves (/a2a/{agent}); empty at the root paths,
	// which serve the default agent.
	Agent string
	// Version is the A2A protocol version the request speaks: "1.0", or "" for 0.3. A push
	// config the request creates has its notifications rendered in it.
	Version string

	readyOnce sync.Once
	readyCh   chan struct{}

	mu      sync.Mutex
	ids     []string
	status  int
	retry   time.Duration
	outcome string
}

// NewCall returns a call of the caller's credential and Last-Event-ID.
func NewCall(cred frontdoor.Credential, lastEventID string) *Call {
	return &Call{Credential: cred, LastEventID: lastEventID, readyCh: make(chan struct{})}
}

// Ready is closed once the handler's stream is open (its checks passed), so the HTTP layer may
// send the stream's headers before its first event.
func (c *Call) Ready() <-chan struct{} { return c.readyCh }

func (c *Call) ready() {
	if c.readyCh != nil {
		c.readyOnce.Do(func() { close(c.readyCh) })
	}
}

type callKey struct{}

// WithCall returns ctx carrying c.
func WithCall(ctx context.Context, c *Call) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}

// callFrom returns the call of ctx, or an empty one (a handler used without package rpc).
func callFrom(ctx context.Context) *Call {
	if c, ok := ctx.Value(callKey{}).(*Call); ok {
		return c
	}
	return NewCall("", "")
}

// tag queues the SSE id of the next event the handler yields; the response writer takes ids in
// the order events are written, one per event (an empty one writes no id: an error event).
func (c *Call) tag(id string) {
	c.mu.Lock()
	c.ids = append(c.ids, id)
	c.mu.Unlock()
}

// NextID returns the SSE id of the next event written, or "" when none was queued.
func (c *Call) NextID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.ids) == 0 {
		return ""
	}
	id := c.ids[0]
	c.ids = c.ids[1:]
	return id
}

// refuse asks the HTTP layer to answer with status (429 or 503, or 401) and Retry-After instead
// of 200, if nothing has been written yet.
func (c *Call) refuse(status int, retry time.Duration) {
	c.mu.Lock()
	c.status, c.retry = status, retry
	c.mu.Unlock()
}

// Refusal returns the HTTP status the handler asked for (0 for none) and its Retry-After.
func (c *Call) Refusal() (int, time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status, c.retry
}

// SetOutcome records the request's outcome for the metrics ("ok" unless set).
func (c *Call) SetOutcome(o string) {
	c.mu.Lock()
	if c.outcome == "" {
		c.outcome = o
	}
	c.mu.Unlock()
}

// clearOutcome forgets an outcome recorded for an error the request answered anyway.
func (c *Call) clearOutcome() {
	c.mu.Lock()
	c.outcome = ""
	c.mu.Unlock()
}

// Outcome is the recorded outcome, "ok" when none was.
func (c *Call) Outcome() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.outcome == "" {
		return "ok"
	}
	return c.outcome
}

// Tag queues the SSE id of the next event (tests of the HTTP layer).
func (c *Call) Tag(id string) { c.tag(id) }

// Refuse asks for an HTTP refusal (tests of the HTTP layer).
func (c *Call) Refuse(status int, retry time.Duration) { c.refuse(status, retry) }
