package sse

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/turnstile-run/turnstile/pkg/admission"
	"github.com/turnstile-run/turnstile/pkg/lifecycle"
	"github.com/turnstile-run/turnstile/pkg/park"
	"github.com/turnstile-run/turnstile/pkg/streams"
	"github.com/turnstile-run/turnstile/pkg/telemetry"
	"github.com/turnstile-run/turnstile/pkg/wire"
	"github.com/turnstile-run/turnstile/services/gateway/internal/hub"
)

// keptBatchCap is the largest live batch slice a stream keeps between batches.
const keptBatchCap = 64

// What a live stream is woken for beside pkg/park's KeepAlive, Gone and Signal (its API key's
// revocation may have changed).
const (
	evFeed  = park.User      // the hub has entries for it
	evClose = park.User << 1 // drained or cut (tracked.Done is closed)
)

// stream is one stream of the handler, from its admission to its end: who opened it, its place in
// the handler's books (its tracking, its slot in the lot), and its write state.
type stream struct {
	h       *Handler
	session wire.SessionKey
	apiKey  string          // the token's API key ID, "" for none
	slot    *admission.Slot // its place under the caps; nil when it rides on a front door's
	tracked *lifecycle.Stream
	parked  atomic.Pointer[park.Stream] // set once, when the stream opens
	sub     *hub.Subscriber
	batch   []*hub.Delivery

	ew    *eventWriter
	out   sink
	epoch string
	last  streams.EntryID
	turn  string
	ctx   context.Context // the request's trace, for the spans of deliveries
	live  bool
}

// step acts on the wakes in ev; it reports whether the stream ended.
func (s *stream) step(ev park.Event) (ended bool) {
	h := s.h
	if ev&park.Gone != 0 {
		return true
	}
	select {
	case <-s.tracked.Done():
		s.end("server closing this stream; reconnect", "drain")
		return true
	default:
	}
	if ev&park.Signal != 0 && s.apiKey != "" && h.cfg.Revocations.Revoked(s.apiKey) {
		s.revoke()
		return true
	}
	if ev&evFeed != 0 {
		var lost bool
		s.batch, lost = s.sub.Next(s.batch[:0])
		if lost {
			s.end("client too slow; reconnect to resume", "slow_client")
			return true
		}
		if len(s.batch) > 0 {
			done, changed := false, false
			for _, d := range s.batch {
				if done, changed = s.deliver(d); done || changed {
					break
				}
			}
			clear(s.batch)
			if cap(s.batch) > keptBatchCap || len(s.batch) == 0 {
				s.batch = nil // an idle stream keeps no slice
			} else {
				s.batch = s.batch[:0]
			}
			if changed {
				// The stream was lost and restarted under us: end so the client's resume gets a reset.
				s.end("stream generation changed; reconnect", "epoch_changed")
				return true
			}
			if s.flush() != nil || done {
				return true
			}
		}
	}
	if ev&park.KeepAlive != 0 {
		s.arm()
		s.ew.comment("keep-alive")
		if s.flush() != nil {
			return true
		}
	}
	return false
}

// release gives back what an ended stream held once pkg/park let go of it (and closed a taken-over
// connection): its subscription, its slot under the caps, its tracking.
func (s *stream) release() {
	if s.sub != nil {
		s.h.hub.Unsubscribe(s.sub)
	}
	s.slot.Release()
	s.h.connections.Dec()
	s.tracked.Release()
}

// deliver sends a live entry; changed reports an entry of another generation (nothing sent).
func (s *stream) deliver(d *hub.Delivery) (done, changed bool) {
	if s.epoch != "" && d.Epoch != s.epoch {
		return false, true
	}
	if s.epoch == "" {
		if s.last != (streams.EntryID{}) {
			return false, true
		}
		s.epoch = d.Epoch
	}
	return s.send(d), false
}

// send writes an entry unless it was already sent or belongs to another turn; it reports whether
// the stream is finished (the followed turn reached its terminal event).
func (s *stream) send(d *hub.Delivery) bool {
	if !s.last.Less(d.ID) {
		return false
	}
	s.last = d.ID
	if s.turn != "" && d.TurnID != s.turn {
		return false
	}
	s.arm()
	s.ew.event(streams.Cursor{Epoch: s.epoch, ID: d.ID}.String(), string(d.Type), d.Data)
	s.h.sent.Inc()
	if s.live {
		s.h.lag.Observe(max(0, time.Since(time.UnixMilli(int64(d.ID.Ms))).Seconds()))
	}
	if d.Traceparent != "" && s.ctx != nil {
		_, span := telemetry.Start(telemetry.FromTraceparent(s.ctx, d.Traceparent), "gateway.deliver "+string(d.Type), trace.WithSpanKind(trace.SpanKindProducer))
		span.End()
	}
	return s.turn != "" && d.Type.Terminal()
}

// end closes the stream with a comment saying why; the client reconnects after its retry delay.
func (s *stream) end(why, reason string) {
	s.h.closed.WithLabelValues(reason).Inc()
	s.arm()
	s.ew.comment(why)
	_ = s.flush()
}

// revoke ends the stream of a revoked API key with stream.revoked; the client's reconnect is
// refused with 401, which makes EventSource give up.
func (s *stream) revoke() {
	s.h.closed.WithLabelValues("revoked").Inc()
	s.arm()
	s.ew.event("", string(wire.EventStreamRevoked), `{"reason":"api_key_revoked"}`)
	_ = s.flush()
}

// arm bounds the writes that follow; called before each burst of writes, as the buffered writers
// may reach the connection before the burst's flush.
func (s *stream) arm() { _ = s.out.SetWriteDeadline(time.Now().Add(s.h.cfg.WriteTimeout)) }

// flush sends what was written and disarms the write deadline: an idle stream keeps no timer, and
// over HTTP/2 a deadline left armed resets the stream when it passes, write pending or not.
func (s *stream) flush() error {
	s.arm()
	if err := s.ew.flush(); err != nil {
		return err
	}
	if err := s.out.Flush(); err != nil {
		return err
	}
	_ = s.out.SetWriteDeadline(time.Time{}) // as in arm: a writer without deadlines has none armed
	return nil
}

// sink is where a stream's frames go: the ResponseWriter, or the taken-over connection.
type sink interface {
	Write(p []byte) (int, error)
	Flush() error
	SetWriteDeadline(t time.Time) error
}

type rcSink struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func (s rcSink) Write(p []byte) (int, error)        { return s.w.Write(p) }
func (s rcSink) Flush() error                       { return s.rc.Flush() }
func (s rcSink) SetWriteDeadline(t time.Time) error { return s.rc.SetWriteDeadline(t) }

// connSink writes to a taken-over connection, unbuffered.
type connSink struct{ net.Conn }

func (connSink) Flush() error { return nil }
