package frontdoor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/turnstile-run/turnstile/pkg/admission"
	"github.com/turnstile-run/turnstile/pkg/sse"
	"github.com/turnstile-run/turnstile/pkg/streamtoken"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

// Stream defaults.
const (
	// MaxReconnectsDefault is how many reconnects in a row may bring no event before Next gives up.
	MaxReconnectsDefault = 10
	// reconnectDelayDefault is the pause before a reconnect when the gateway sent no retry hint.
	reconnectDelayDefault = time.Second
	// reconnectDelayMax caps a retry hint, so a stream never waits longer than this to resume.
	reconnectDelayMax = 10 * time.Second
)

// StreamRequest names a session stream to follow.
type StreamRequest struct {
	SessionID string
	// Token is a stream token for the session (Accepted.StreamToken or StreamGrant.StreamToken).
	Token string
	// LastEventID resumes after this native event ID ("<epoch>:<entry id>"); empty starts at the
	// session's oldest retained event (that turn's, with TurnID).
	LastEventID string
	// TurnID follows one turn: the stream ends (io.EOF) after its terminal event.
	TurnID string
	// Live asks for events after now only; ignored when LastEventID is set.
	Live bool
	// MaxReconnects bounds reconnects in a row that bring no event. Defaults to
	// MaxReconnectsDefault.
	MaxReconnects int
}

// Event is one event of a session stream.
type Event struct {
	// ID is the native SSE id, "<epoch>:<entry id>": a cursor for StreamRequest.LastEventID and
	// strictly increasing within an epoch.
	ID string
	// Type is the event's name: turn.started, turn.delta, …, stream.reset, stream.revoked.
	Type wire.EventType
	// Data is the event's JSON payload (the wire.*Data shapes).
	Data json.RawMessage
}

// Base decodes the fields every turn event carries.
func (e Event) Base() (wire.EventBase, error) {
	var b wire.EventBase
	if err := json.Unmarshal(e.Data, &b); err != nil {
		return b, fmt.Errorf("decode %s: %w", e.Type, err)
	}
	return b, nil
}

// Stream is an open session stream. Next is not safe for concurrent use; Close is, from any
// goroutine.
type Stream struct {
	c      *Client
	req    StreamRequest
	ctx    context.Context
	cancel context.CancelFunc

	mu   sync.Mutex // guards body against Close
	body io.ReadCloser
	// slot is the stream's place under the process's caps, from OpenStream to Close, connected to
	// the gateway or between reconnects; nil without a budget.
	slot *admission.Slot

	rd       *sse.Reader
	lastID   string
	retry    time.Duration
	idle     int  // reconnects in a row without an event
	finished bool // the followed turn's terminal event was delivered
}

// OpenStream connects to the session's stream. A non-200 answer (a bad or revoked token, an
// unknown session, a bad cursor) is a *Problem; so is a gateway that cannot be reached, and a
// stream the client's admission budget refuses (503 over-capacity, 429 tenant-stream-share, with
// a Retry-After). An admitted stream holds its slot until Close: call Close once done with it.
//
// The stream reconnects as a browser's EventSource does: when the gateway closes it without the
// followed turn being over (a drain, a full replica answering inside a 200 with a retry hint) or
// the connection drops, Next waits for the hint and resumes after the last event it returned.
func (c *Client) OpenStream(ctx context.Context, req StreamRequest) (*Stream, error) {
	if req.MaxReconnects <= 0 {
		req.MaxReconnects = MaxReconnectsDefault
	}
	slot, err := c.admit(req)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &Stream{c: c, req: req, ctx: ctx, cancel: cancel, lastID: req.LastEventID, retry: reconnectDelayDefault, slot: slot}
	if err := s.connect(); err != nil {
		cancel()
		slot.Release()
		return nil, err
	}
	return s, nil
}

// admit takes a slot of the client's budget for a stream, or answers the refusal as a *Problem.
// The tenant is the stream token's (a token intake just issued; the gateway verifies it).
func (c *Client) admit(req StreamRequest) (*admission.Slot, error) {
	if c.admission == nil {
		return nil, nil
	}
	tenant := ""
	if c.tenants {
		if claims, ok := streamtoken.Unverified(req.Token); ok {
			tenant = claims.Tenant
		}
	}
	slot, refusal := c.admission.Admit(c.door, wire.NewSessionKey(tenant, req.SessionID), tenant)
	if refusal != "" {
		p := refusal.Problem(c.admission.Retry())
		return nil, &Problem{Status: p.Status, Type: p.Type, Title: http.StatusText(p.Status), Detail: p.Detail, RetryAfter: p.RetryAfter}
	}
	return slot, nil
}

// LastEventID is the ID of the last event Next returned (or the request's LastEventID).
func (s *Stream) LastEventID() string { return s.lastID }

// Next returns the next event. It returns io.EOF after the followed turn's terminal event, and an
// error when the stream's context ends, Close was called, the gateway refused a reconnect
// (*Problem), or MaxReconnects reconnects in a row brought nothing.
func (s *Stream) Next() (Event, error) {
	for {
		if s.finished {
			return Event{}, io.EOF
		}
		if s.rd != nil {
			ev, err := s.rd.Next()
			if err == nil {
				s.idle = 0
				if ev.ID != "" {
					s.lastID = ev.ID
				}
				if d, ok := s.rd.Retry(); ok {
					s.retry = min(d, reconnectDelayMax)
				}
				out := Event{ID: ev.ID, Type: wire.EventType(ev.Type), Data: json.RawMessage(ev.Data)}
				if s.req.TurnID != "" && out.Type.Terminal() {
					s.finished = true
				}
				return out, nil
			}
			if errors.Is(err, sse.ErrTooLarge) {
				return Event{}, fmt.Errorf("session stream: %w", err)
			}
			s.closeBody()
			s.rd = nil
		}
		if err := s.ctx.Err(); err != nil {
			return Event{}, fmt.Errorf("session stream: %w", context.Cause(s.ctx))
		}
		s.idle++
		if s.idle > s.req.MaxReconnects {
			return Event{}, unavailable("session stream", fmt.Errorf("%d reconnects in a row brought no event", s.req.MaxReconnects))
		}
		t := time.NewTimer(s.retry)
		select {
		case <-s.ctx.Done():
			t.Stop()
			return Event{}, fmt.Errorf("session stream: %w", context.Cause(s.ctx))
		case <-t.C:
		}
		if err := s.connect(); err != nil {
			var p *Problem
			if errors.As(err, &p) && p.Type == UnavailableType {
				continue // the gateway is not there: try again, within MaxReconnects
			}
			return Event{}, err
		}
	}
}

// Close ends the stream and gives back its slot; a Next in progress returns an error.
func (s *Stream) Close() error {
	s.cancel()
	s.closeBody()
	s.slot.Release()
	return nil
}

func (s *Stream) closeBody() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.body != nil {
		_ = s.body.Close()
		s.body = nil
	}
}

// connect opens one connection from the last event ID.
func (s *Stream) connect() error {
	q := url.Values{}
	if s.req.TurnID != "" {
		q.Set("turn_id", s.req.TurnID)
	}
	if s.lastID == "" && s.req.Live {
		q.Set("last_event_id", "$")
	}
	u := s.c.gateway + "/v1/sessions/" + url.PathEscape(s.req.SessionID) + "/events"
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(s.ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("build stream request: %w", err)
	}
	req.Header.Set("Accept", "text/event-stream")
	if s.req.Token != "" {
		req.Header.Set("Authorization", "Bearer "+s.req.Token)
	}
	if s.lastID != "" {
		req.Header.Set("Last-Event-ID", s.lastID)
	}
	if s.slot != nil {
		// A gateway of this process lets the stream ride on the slot instead of counting it again.
		req.Header.Set(admission.TicketHeader, s.slot.Ticket())
	}
	s.c.decorate(s.ctx, req, "")
	resp, err := s.c.http.Do(req)
	if err != nil {
		return unavailable("open session stream", err)
	}
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
		_ = resp.Body.Close()
		return problemFrom(resp, raw)
	}
	s.mu.Lock()
	if s.ctx.Err() != nil {
		s.mu.Unlock()
		_ = resp.Body.Close()
		return fmt.Errorf("session stream: %w", context.Cause(s.ctx))
	}
	s.body = resp.Body
	s.mu.Unlock()
	s.rd = sse.NewReader(resp.Body, 0)
	return nil
}

// Next is one result of Stream.Next: an event, or the error that ended the stream.
type Next struct {
	Event Event
	Err   error
}

// Pump reads the stream on one goroutine and sends each result on the returned channel, so a
// front door's write loop can select on events and its keep-alive ticker together (a takeover
// leaves a stream silent for seconds). The channel's last value carries the error that ended the
// stream (io.EOF after a followed turn's end); pumping also stops when ctx ends. stop closes the
// stream and waits for the goroutine: call it once, when the loop is done.
func (s *Stream) Pump(ctx context.Context) (results <-chan Next, stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	out := make(chan Next)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			ev, err := s.Next()
			select {
			case out <- Next{ev, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return out, func() {
		cancel()
		_ = s.Close()
		<-done
	}
}
