package sse

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/pkg/streams"
	"github.com/turnstile-run/turnstile/pkg/telemetry"
	"github.com/turnstile-run/turnstile/pkg/wire"
	"github.com/turnstile-run/turnstile/services/gateway/internal/hub"
)

// Problem types the gateway answers with.
const (
	ProblemInvalidSession = "invalid-session-id"
	ProblemInvalidCursor  = "invalid-cursor"
	ProblemInvalidTurnID  = "invalid-turn-id"
)

// Config tunes the handler.
type Config struct {
	KeepAlive time.Duration
	// Retry is the base reconnect delay sent in "retry:"; each connection gets it jittered.
	// Defaults to 1s.
	Retry time.Duration
	// ReplayBatch is how many entries one replay read fetches. Defaults to 500.
	ReplayBatch int64
}

// Handler serves GET /v1/sessions/{session_id}/events.
type Handler struct {
	cfg    Config
	hub    *hub.Hub
	reader *streams.Reader
	rdb    redis.UniversalClient
	log    *slog.Logger

	mu       sync.Mutex
	conns    map[*conn]struct{}
	draining bool

	connections prometheus.Gauge
	sent        prometheus.Counter
	resumes     *prometheus.CounterVec
	lag         prometheus.Histogram
}

type conn struct {
	closeWithRetry chan struct{}
	once           sync.Once
}

// New returns a handler.
func New(cfg Config, h *hub.Hub, reader *streams.Reader, rdb redis.UniversalClient, log *slog.Logger, reg prometheus.Registerer) *Handler {
	if cfg.Retry == 0 {
		cfg.Retry = time.Second
	}
	if cfg.ReplayBatch == 0 {
		cfg.ReplayBatch = 500
	}
	hd := &Handler{cfg: cfg, hub: h, reader: reader, rdb: rdb, log: log, conns: map[*conn]struct{}{},
		connections: prometheus.NewGauge(prometheus.GaugeOpts{Name: "turnstile_gateway_connections",
			Help: "Open SSE connections."}),
		sent: prometheus.NewCounter(prometheus.CounterOpts{Name: "turnstile_gateway_events_sent_total",
			Help: "Events written to SSE clients."}),
		resumes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "turnstile_gateway_resumes_total",
			Help: "Stream opens by cursor result: fresh, live, resumed, reset."}, []string{"result"}),
	}
	hd.lag = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "turnstile_gateway_delivery_lag_seconds",
		Help:    "Time from an event's append to Redis (its entry ID) to its write to a live SSE client.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)})
	reg.MustRegister(hd.connections, hd.sent, hd.resumes, hd.lag)
	return hd
}

// Routes mounts the handler.
func (h *Handler) Routes(r chi.Router) {
	r.Get("/v1/sessions/{session_id}/events", h.serve)
}

// Connections counts open streams.
func (h *Handler) Connections() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.conns)
}

// Drain closes every stream with a retry hint, so clients resume on another replica, and refuses
// new streams the same way.
func (h *Handler) Drain() {
	h.mu.Lock()
	h.draining = true
	conns := make([]*conn, 0, len(h.conns))
	for c := range h.conns {
		conns = append(conns, c)
	}
	h.mu.Unlock()
	for _, c := range conns {
		c.once.Do(func() { close(c.closeWithRetry) })
	}
}

// start resolves where a stream begins: the entry after which to send, and whether to announce a
// reset first.
type start struct {
	after  streams.EntryID
	epoch  string
	reset  string // reason, empty for none
	result string
}

func (h *Handler) serve(w http.ResponseWriter, r *http.Request) {
	sessionID := chi.URLParam(r, "session_id")
	if !wire.SessionIDValid(sessionID) {
		httpx.WriteProblem(w, httpx.Problem{Type: ProblemInvalidSession, Status: http.StatusBadRequest,
			Detail: "session_id must be 1-128 characters of [A-Za-z0-9._:-]"})
		return
	}
	turnFilter := r.URL.Query().Get("turn_id")
	if turnFilter != "" {
		if _, err := uuid.Parse(turnFilter); err != nil {
			httpx.WriteProblem(w, httpx.Problem{Type: ProblemInvalidTurnID, Status: http.StatusBadRequest, Detail: "turn_id must be a UUID"})
			return
		}
	}
	raw := r.Header.Get("Last-Event-ID")
	if raw == "" {
		raw = r.URL.Query().Get("last_event_id")
	}
	var cursor *streams.Cursor
	live := false
	switch raw {
	case "":
	case "$":
		live = true
	default:
		c, err := streams.ParseCursor(raw)
		if err != nil {
			httpx.WriteProblem(w, httpx.Problem{Type: ProblemInvalidCursor, Status: http.StatusBadRequest,
				Detail: `Last-Event-ID must be "<epoch>:<ms>-<seq>" as sent in an event id, or "$" for live events only`})
			return
		}
		cursor = &c
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}

	ctx := r.Context()
	keys := h.reader.Keys(sessionID)
	// A follower of one turn that reconnects after the turn's terminal event has everything: 204
	// tells EventSource to stop reconnecting.
	if turnFilter != "" && cursor != nil {
		if term, err := h.rdb.HGet(ctx, keys.Meta, "t:"+turnFilter).Result(); err == nil {
			if id, err := streams.ParseEntryID(term); err == nil && !cursor.ID.Less(id) {
				w.WriteHeader(http.StatusNoContent)
				return
			}
		}
	}

	c := &conn{closeWithRetry: make(chan struct{})}
	h.mu.Lock()
	draining := h.draining
	if !draining {
		h.conns[c] = struct{}{}
	}
	h.mu.Unlock()

	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	ew := newEventWriter(w)
	ew.retry(httpx.Jitter(h.cfg.Retry).Milliseconds())
	if draining {
		ew.comment("draining; reconnect")
		_ = ew.flush()
		flusher.Flush()
		return
	}
	h.connections.Inc()
	defer func() {
		h.mu.Lock()
		delete(h.conns, c)
		h.mu.Unlock()
		h.connections.Dec()
	}()

	sub, err := h.hub.Subscribe(ctx, sessionID)
	if err != nil {
		h.log.Warn("subscribe failed", "session_id", sessionID, "err", err)
		ew.comment("temporarily unavailable; reconnect")
		_ = ew.flush()
		flusher.Flush()
		return
	}
	defer h.hub.Unsubscribe(sub)

	st, err := h.reader.State(ctx, sessionID)
	if err != nil {
		ew.comment("temporarily unavailable; reconnect")
		_ = ew.flush()
		flusher.Flush()
		return
	}
	begin := resolveStart(st, cursor, live)
	h.resumes.WithLabelValues(begin.result).Inc()
	if begin.reset != "" {
		data, _ := json.Marshal(map[string]string{"reason": begin.reset, "epoch": st.Epoch})
		id := ""
		if st.Epoch != "" {
			id = streams.Cursor{Epoch: st.Epoch}.String()
		}
		ew.event(id, string(wire.EventStreamReset), string(data))
	}

	s := &stream{h: h, ew: ew, flusher: flusher, epoch: begin.epoch, last: begin.after, turn: turnFilter, ctx: ctx}
	// Replay from Redis, then follow the shared feed, skipping what replay already sent.
	for {
		entries, err := h.reader.After(ctx, sessionID, s.last, h.cfg.ReplayBatch)
		if err != nil {
			ew.comment("temporarily unavailable; reconnect")
			_ = s.flush()
			return
		}
		for _, e := range entries {
			if s.send(hub.Delivery{Epoch: begin.epoch, Entry: e}) {
				_ = s.flush()
				return
			}
		}
		if int64(len(entries)) < h.cfg.ReplayBatch {
			break
		}
	}
	if s.flush() != nil {
		return
	}

	s.live = true // from here on entries arrive as they are appended: their delivery lag is meaningful
	keepAlive := time.NewTicker(h.cfg.KeepAlive)
	defer keepAlive.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.closeWithRetry:
			ew.comment("server draining; reconnect")
			_ = s.flush()
			return
		case <-sub.Overflowed:
			ew.comment("client too slow; reconnect to resume")
			_ = s.flush()
			return
		case <-keepAlive.C:
			ew.comment("keep-alive")
			if s.flush() != nil {
				return
			}
		case d := <-sub.C:
			if s.epoch != "" && d.Epoch != s.epoch {
				// The stream was lost and restarted under us: end so the client's resume gets a reset.
				ew.comment("stream generation changed; reconnect")
				_ = s.flush()
				return
			}
			s.epoch = d.Epoch
			done := s.send(d)
			// Drain whatever else is buffered before one flush.
			for !done && len(sub.C) > 0 {
				d = <-sub.C
				if d.Epoch != s.epoch {
					break
				}
				done = s.send(d)
			}
			if s.flush() != nil || done {
				return
			}
		}
	}
}

// resolveStart decides where a stream starts for a cursor.
func resolveStart(st streams.State, cursor *streams.Cursor, live bool) start {
	switch {
	case live:
		return start{after: st.LastID, epoch: st.Epoch, result: "live"}
	case cursor == nil:
		return start{epoch: st.Epoch, result: "fresh"}
	case !st.Exists:
		return start{epoch: st.Epoch, reset: "stream_lost", result: "reset"}
	case cursor.Epoch != st.Epoch:
		return start{epoch: st.Epoch, reset: "epoch_changed", result: "reset"}
	case cursor.ID.Less(st.MaxDeletedID):
		return start{epoch: st.Epoch, reset: "history_trimmed", result: "reset"}
	case st.LastID.Less(cursor.ID):
		// A cursor beyond anything this generation produced cannot have come from it.
		return start{epoch: st.Epoch, reset: "unknown_cursor", result: "reset"}
	}
	return start{after: cursor.ID, epoch: st.Epoch, result: "resumed"}
}

// stream is one connection's write state.
type stream struct {
	h       *Handler
	ew      *eventWriter
	flusher http.Flusher
	epoch   string
	last    streams.EntryID
	turn    string
	ctx     context.Context
	live    bool
}

// send writes an entry unless it was already sent or belongs to another turn; it reports whether
// the stream is finished (the followed turn reached its terminal event).
func (s *stream) send(d hub.Delivery) bool {
	if !s.last.Less(d.ID) {
		return false
	}
	s.last = d.ID
	if s.turn != "" && d.TurnID != s.turn {
		return false
	}
	if s.epoch == "" {
		s.epoch = d.Epoch
	}
	s.ew.event(streams.Cursor{Epoch: s.epoch, ID: d.ID}.String(), string(d.Type), d.Data)
	s.h.sent.Inc()
	if s.live {
		s.h.lag.Observe(max(0, time.Since(time.UnixMilli(int64(d.ID.Ms))).Seconds()))
	}
	if d.Traceparent != "" {
		_, span := telemetry.Start(telemetry.FromTraceparent(s.ctx, d.Traceparent), "gateway.deliver "+string(d.Type), trace.WithSpanKind(trace.SpanKindProducer))
		span.End()
	}
	return s.turn != "" && d.Type.Terminal()
}

func (s *stream) flush() error {
	if err := s.ew.flush(); err != nil {
		return err
	}
	s.flusher.Flush()
	return nil
}
