package sse

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/pkg/region"
	"github.com/turnstile-run/turnstile/pkg/streams"
	"github.com/turnstile-run/turnstile/pkg/streamtoken"
	"github.com/turnstile-run/turnstile/pkg/telemetry"
	"github.com/turnstile-run/turnstile/pkg/wire"
	"github.com/turnstile-run/turnstile/services/gateway/internal/hub"
	"github.com/turnstile-run/turnstile/services/gateway/internal/revoke"
)

// ReplayBatchDefault is how many entries one replay read fetches by default.
const ReplayBatchDefault = 500

// keptBatchCap is the largest live batch slice a stream keeps between batches.
const keptBatchCap = 64

// corsMaxAge is how long, in seconds, a browser may cache a preflight's answer.
const corsMaxAge = "600"

// Config tunes the handler. Zero fields take the defaults named; those a TURNSTILE_* variable sets
// are pkg/config's constants.
type Config struct {
	// KeepAlive is the interval of keep-alive comments. Defaults to config.KeepAliveDefault.
	KeepAlive time.Duration
	// Retry is the base reconnect delay sent in "retry:"; each connection gets it jittered.
	// Defaults to config.GatewayRetryDefault.
	Retry time.Duration
	// OverloadRetry is the base reconnect delay sent when a cap refuses a stream. Defaults to
	// config.GatewayOverloadRetryDefault.
	OverloadRetry time.Duration
	// ReplayBatch is how many entries one replay read fetches. Defaults to ReplayBatchDefault.
	ReplayBatch int64
	// MaxConnections caps this replica's open streams. Defaults to
	// config.GatewayMaxConnectionsDefault.
	MaxConnections int
	// MaxPerSession caps one session's open streams on this replica. Defaults to
	// config.GatewayMaxPerSessionDefault.
	MaxPerSession int
	// MaxTenantShare is the percentage of MaxConnections one tenant's streams may hold (at least
	// one stream); it applies to streams whose token names a tenant. Defaults to
	// config.GatewayMaxTenantShareDefault.
	MaxTenantShare int
	// DrainBatch streams are closed at once when draining, DrainInterval (jittered) apart.
	// Default config.GatewayDrainBatchDefault and config.GatewayDrainIntervalDefault.
	DrainBatch    int
	DrainInterval time.Duration
	// WriteTimeout bounds one flush to a client. Defaults to config.GatewayWriteTimeoutDefault.
	WriteTimeout time.Duration
	// CORSOrigins may open streams from other origins; "*" allows any. Empty: same origin only.
	CORSOrigins []string
	// Region is this region (TURNSTILE_REGION and the region map): a stream of another region's
	// session or turn is answered 421, and ?turn_id= takes either form of this region's turn IDs.
	// The zero value is single-region mode.
	Region region.Local
	// Tokens verifies stream tokens; nil disables the check (development only).
	Tokens *streamtoken.Signer
	// Revocations knows the revoked API keys: a token of a revoked key is refused at open, and
	// its open streams end with stream.revoked. Nil knows none.
	Revocations *revoke.Watcher
}

func (c *Config) applyDefaults() {
	def := func(p *time.Duration, d time.Duration) {
		if *p == 0 {
			*p = d
		}
	}
	defInt := func(p *int, d int) {
		if *p == 0 {
			*p = d
		}
	}
	def(&c.KeepAlive, config.KeepAliveDefault)
	def(&c.Retry, config.GatewayRetryDefault)
	def(&c.OverloadRetry, config.GatewayOverloadRetryDefault)
	def(&c.DrainInterval, config.GatewayDrainIntervalDefault)
	def(&c.WriteTimeout, config.GatewayWriteTimeoutDefault)
	if c.ReplayBatch == 0 {
		c.ReplayBatch = ReplayBatchDefault
	}
	defInt(&c.MaxConnections, config.GatewayMaxConnectionsDefault)
	defInt(&c.MaxPerSession, config.GatewayMaxPerSessionDefault)
	defInt(&c.MaxTenantShare, config.GatewayMaxTenantShareDefault)
	defInt(&c.DrainBatch, config.GatewayDrainBatchDefault)
}

// OpenInfo describes how a stream was opened; see Hooks.
type OpenInfo struct {
	SessionID string
	// CursorSource is "header", "query" or "" (no cursor).
	CursorSource string
	Cursor       string
	// Result is fresh, live, resumed, reset, or a refusal: draining, over_capacity,
	// over_tenant_share.
	Result string
}

// Hooks are test and observability callbacks; they must be fast and concurrency-safe.
type Hooks struct {
	OnOpen func(OpenInfo)
}

// Handler serves GET /v1/sessions/{session_id}/events.
type Handler struct {
	cfg    Config
	hub    *hub.Hub
	reader *streams.Reader
	log    *slog.Logger
	hooks  atomic.Pointer[Hooks]
	cors   map[string]bool
	anyOK  bool

	streams sync.WaitGroup // admitted streams still running

	mu         sync.Mutex
	conns      map[*conn]struct{}
	perSession map[string]int
	perTenant  map[string]int
	maxTenant  int // MaxTenantShare of MaxConnections, in streams
	draining   bool
	loops      *idleLoops // running while streams are live; see acquireLoops

	connections prometheus.Gauge
	sent        prometheus.Counter
	resumes     *prometheus.CounterVec
	closed      *prometheus.CounterVec
	lag         prometheus.Histogram
}

type conn struct {
	session        string
	apiKey         string // the token's API key ID, "" for none
	tenant         string // the token's tenant, "" without tokens
	closeWithRetry chan struct{}
	once           sync.Once
	live           *live // set at admission, before the conn is shared
}

// close tells the stream to end with a retry hint; the stream sees the closed channel on the wake
// or, if it is not live yet, when it goes live.
func (c *conn) close() {
	c.once.Do(func() {
		close(c.closeWithRetry)
		if c.live != nil {
			c.live.wake(evClose)
		}
	})
}

// New returns a handler.
func New(cfg Config, h *hub.Hub, reader *streams.Reader, log *slog.Logger, reg prometheus.Registerer) *Handler {
	cfg.applyDefaults()
	hd := &Handler{
		cfg: cfg, hub: h, reader: reader, log: log, conns: map[*conn]struct{}{},
		perSession: map[string]int{}, perTenant: map[string]int{}, cors: map[string]bool{},
		maxTenant: max(1, cfg.MaxConnections*cfg.MaxTenantShare/100),
		connections: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "turnstile_gateway_connections",
			Help: "Open SSE connections.",
		}),
		sent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "turnstile_gateway_events_sent_total",
			Help: "Events written to SSE clients.",
		}),
		resumes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "turnstile_gateway_resumes_total",
			Help: "Stream opens by cursor result: fresh, live, resumed, reset.",
		}, []string{"result"}),
		closed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "turnstile_gateway_streams_closed_total",
			Help: "Streams the gateway ended with a retry hint, by reason.",
		}, []string{"reason"}),
	}
	for _, o := range cfg.CORSOrigins {
		if o == "*" {
			hd.anyOK = true
		}
		hd.cors[strings.TrimRight(o, "/")] = true
	}
	hd.lag = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "turnstile_gateway_delivery_lag_seconds",
		Help:    "Time from an event's append to Redis (its entry ID) to its write to a live SSE client.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
	})
	reg.MustRegister(hd.connections, hd.sent, hd.resumes, hd.closed, hd.lag)
	return hd
}

// SetHooks installs hooks (nil removes them).
func (h *Handler) SetHooks(hk *Hooks) { h.hooks.Store(hk) }

// Routes mounts the handler.
func (h *Handler) Routes(r chi.Router) {
	r.Get("/v1/sessions/{session_id}/events", h.serve)
	r.Options("/v1/sessions/{session_id}/events", h.preflight)
}

// Connections counts open streams.
func (h *Handler) Connections() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.conns)
}

// Drain refuses new streams (inside a 200, with a retry hint) and closes the open ones with a
// retry hint in batches of DrainBatch, a jittered DrainInterval apart, so clients resume on other
// replicas without arriving all at once. Each closed stream also carries its own jittered retry.
// It returns when every stream was told to close or ctx is done.
func (h *Handler) Drain(ctx context.Context) {
	h.mu.Lock()
	h.draining = true
	conns := make([]*conn, 0, len(h.conns))
	for c := range h.conns {
		conns = append(conns, c)
	}
	h.mu.Unlock()
	rand.Shuffle(len(conns), func(i, j int) { conns[i], conns[j] = conns[j], conns[i] }) //nolint:gosec // spreads reconnects; nothing secret depends on the order
	for i := 0; i < len(conns); i += h.cfg.DrainBatch {
		if i > 0 && h.cfg.DrainInterval > 0 {
			t := time.NewTimer(httpx.Jitter(h.cfg.DrainInterval))
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				// Close the rest at once: the shutdown deadline is worth more than the spread.
				for _, c := range conns[i:] {
					c.close()
				}
				return
			}
		}
		for _, c := range conns[i:min(i+h.cfg.DrainBatch, len(conns))] {
			c.close()
		}
	}
}

// Wait blocks until every admitted stream has ended or ctx is done. Streams on taken-over
// connections outlive their HTTP handlers, so a server's Shutdown does not wait for them: call
// Drain, then Wait.
func (h *Handler) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { h.streams.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for streams to end: %w", context.Cause(ctx))
	}
}

// Cut closes every open stream with a retry hint, without draining: clients reconnect to this
// replica and resume from their cursors. Tests use it to cut streams mid-turn.
func (h *Handler) Cut() {
	h.mu.Lock()
	conns := make([]*conn, 0, len(h.conns))
	for c := range h.conns {
		conns = append(conns, c)
	}
	h.mu.Unlock()
	for _, c := range conns {
		c.close()
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

func (h *Handler) setCORS(w http.ResponseWriter, r *http.Request) {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return
	}
	w.Header().Add("Vary", "Origin")
	if h.anyOK || h.cors[origin] {
		// No Allow-Credentials: streams authenticate with tokens, never cookies, so a page on an
		// allowed origin gains nothing from the browser's credentials and "*" stays harmless.
		w.Header().Set("Access-Control-Allow-Origin", origin)
	}
}

func (h *Handler) preflight(w http.ResponseWriter, r *http.Request) {
	h.setCORS(w, r)
	if w.Header().Get("Access-Control-Allow-Origin") != "" {
		w.Header().Set("Access-Control-Allow-Methods", "GET, OPTIONS")
		w.Header().Set("Access-Control-Allow-Headers", "Authorization, Last-Event-ID, Cache-Control")
		w.Header().Set("Access-Control-Max-Age", corsMaxAge)
	}
	w.WriteHeader(http.StatusNoContent)
}

// authorize checks the stream token when tokens are on and returns its claims (none without
// tokens: the default tenant's session is opened). A valid token for another session is answered
// like an unknown session (404), so one tenant cannot learn that another's session exists; a
// token whose API key was revoked is a 401.
func (h *Handler) authorize(w http.ResponseWriter, o openRequest) (streamtoken.Claims, bool) {
	if h.cfg.Tokens == nil {
		return streamtoken.Claims{}, true
	}
	if o.Token == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="turnstile"`)
		httpx.WriteProblem(w, httpx.ProblemUnauthenticated.Problem("a stream token is required: Authorization: Bearer <stream_token> or ?access_token="))
		return streamtoken.Claims{}, false
	}
	claims, err := h.cfg.Tokens.Verify(o.Token, o.SessionID)
	switch {
	case err == nil && h.cfg.Revocations.Revoked(claims.APIKeyID):
		w.Header().Set("WWW-Authenticate", `Bearer realm="turnstile", error="invalid_token"`)
		httpx.WriteProblem(w, httpx.ProblemUnauthenticated.Problem("the API key this stream token was issued to is revoked"))
	case err == nil:
		return claims, true
	case errors.Is(err, streamtoken.ErrScope):
		httpx.WriteProblem(w, httpx.ProblemSessionNotFound.Problem("no such session"))
	case errors.Is(err, streamtoken.ErrExpired):
		w.Header().Set("WWW-Authenticate", `Bearer realm="turnstile", error="invalid_token"`)
		httpx.WriteProblem(w, httpx.ProblemTokenExpired.Problem("the stream token expired; get a new one from the turn's status"))
	default:
		w.Header().Set("WWW-Authenticate", `Bearer realm="turnstile", error="invalid_token"`)
		httpx.WriteProblem(w, httpx.ProblemUnauthenticated.Problem("the stream token is not valid"))
	}
	return streamtoken.Claims{}, false
}

func (h *Handler) serve(w http.ResponseWriter, r *http.Request) {
	h.setCORS(w, r)
	o, bad := parseOpen(r, h.cfg.Region)
	if bad != nil {
		httpx.WriteProblem(w, *bad)
		return
	}
	claims, ok := h.authorize(w, o)
	if !ok {
		return
	}
	if o.Invalid != nil {
		httpx.WriteProblem(w, *o.Invalid)
		return
	}
	info := OpenInfo{SessionID: o.SessionID, CursorSource: o.CursorSource, Cursor: o.Cursor}
	// The stream read is the tenant's session: its key (wire.SessionKey, the default tenant's
	// without tokens), which only the tenant's token opens.
	o.SessionID = wire.SessionKey(claims.Tenant, o.SessionID)
	sessionID, turnFilter, cursor := o.SessionID, o.TurnID, o.After
	ctx := r.Context()
	// A follower of one turn that reconnects after the turn's terminal event has everything: 204
	// tells EventSource to stop reconnecting.
	if turnFilter != "" && cursor != nil {
		if term, ok, err := h.reader.Terminal(ctx, sessionID, turnFilter); err == nil && ok &&
			term.Epoch == cursor.Epoch && !cursor.ID.Less(term.ID) {
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}

	c := &conn{session: sessionID, apiKey: claims.APIKeyID, tenant: claims.Tenant, closeWithRetry: make(chan struct{})}
	l := &live{c: c, session: sessionID}
	l.h = h
	l.turn = o.TurnID
	c.live = l
	refusal := ""
	h.mu.Lock()
	switch {
	case h.draining:
		refusal = "draining"
	case len(h.conns) >= h.cfg.MaxConnections:
		refusal = "over_capacity"
	case h.perSession[sessionID] >= h.cfg.MaxPerSession:
		refusal = "over_capacity"
	case c.tenant != "" && h.perTenant[c.tenant] >= h.maxTenant:
		refusal = "over_tenant_share"
	default:
		h.conns[c] = struct{}{}
		h.perSession[sessionID]++
		if c.tenant != "" {
			h.perTenant[c.tenant]++
		}
		h.streams.Add(1)
		l.loops = h.acquireLoops()
	}
	h.mu.Unlock()

	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("X-Accel-Buffering", "no")
	if refusal != "" {
		// Retryable refusals stay inside a 200: EventSource gives up for good on anything else.
		w.WriteHeader(http.StatusOK)
		s := &stream{h: h, ew: newEventWriter(w), out: rcSink{w, http.NewResponseController(w)}}
		s.arm()
		info.Result = refusal
		h.fire(info)
		h.closed.WithLabelValues(refusal).Inc()
		switch refusal {
		case "draining":
			s.ew.retry(httpx.Jitter(h.cfg.Retry).Milliseconds())
			s.ew.comment("draining; reconnect")
		case "over_tenant_share":
			s.ew.retry(httpx.Jitter(h.cfg.OverloadRetry).Milliseconds())
			s.ew.comment("tenant over its share of this replica's streams; reconnect later")
		default:
			s.ew.retry(httpx.Jitter(h.cfg.OverloadRetry).Milliseconds())
			s.ew.comment("over capacity; reconnect later")
		}
		_ = s.flush()
		return
	}

	// An idle stream should cost little. Over HTTP/1.x the handler takes the connection over and
	// returns, so net/http releases its per-connection read and write buffers, request state and
	// goroutine; the stream writes straight to the socket (the response is delimited by closing
	// the connection). Once it has replayed and gone live it parks: no goroutine of its own, a
	// short-lived one started by whatever wakes it (see live). Where the connection cannot be
	// taken (HTTP/2), the stream runs in the handler as usual.
	h.connections.Inc()
	if nc, err := h.hijack(w, r); err == nil {
		l.nc, l.out = nc, connSink{nc}
		l.ew = newEventWriter(l.out)
		l.state.Store(stRunning) // owned by the goroutine below until it parks
		// The request's context is not kept (its values, chi's pooled route context among them,
		// belong to the request): only its tracer provider and trace, for the spans of deliveries.
		base := telemetry.WithProvider(context.Background(), telemetry.Provider(ctx))
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			base = trace.ContextWithSpanContext(base, sc)
		}
		l.ctx = base
		go h.serveTakenOver(base, l, o, info) //nolint:contextcheck // the stream outlives the request; it keeps only its trace

		return
	}
	w.WriteHeader(http.StatusOK)
	l.out = rcSink{w, http.NewResponseController(w)}
	l.ew = newEventWriter(l.out)
	l.ctx = ctx
	l.kick = make(chan struct{}, 1)
	h.serveInHandler(ctx, l, o, info)
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

// hijack takes an HTTP/1.x connection over and writes the response head; the connection is
// closed after the stream (Connection: close delimits the body).
func (h *Handler) hijack(w http.ResponseWriter, r *http.Request) (net.Conn, error) {
	if r.ProtoMajor != 1 {
		return nil, errors.New("not HTTP/1.x")
	}
	nc, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return nil, err
	}
	hdr := w.Header()
	hdr.Set("Connection", "close")
	var head strings.Builder
	head.WriteString("HTTP/1.1 200 OK\r\n")
	_ = hdr.Write(&head)
	head.WriteString("\r\n")
	_ = nc.SetWriteDeadline(time.Now().Add(h.cfg.WriteTimeout))
	if _, err := io.WriteString(nc, head.String()); err != nil {
		_ = nc.Close()
		return nil, err
	}
	return nc, nil
}

// open subscribes an admitted stream and replays what its cursor asks for; it reports whether the
// stream is now live. A stream that ended (replay failed, the followed turn is over, the client
// left) has written its last words.
func (h *Handler) open(ctx context.Context, l *live, o openRequest, info OpenInfo) bool {
	sessionID := o.SessionID
	s, ew := &l.stream, l.ew
	s.arm()
	ew.retry(h.retryHint())

	sub, err := h.hub.SubscribeFunc(ctx, sessionID, func() { l.wake(evFeed) })
	if err != nil {
		if ctx.Err() == nil {
			h.log.Warn("subscribe failed", "session_id", sessionID, "err", err)
		}
		s.end("temporarily unavailable; reconnect", "unavailable")
		return false
	}
	l.sub = sub

	st, err := h.reader.State(ctx, sessionID)
	if err != nil {
		s.end("temporarily unavailable; reconnect", "unavailable")
		return false
	}
	begin := resolveStart(st, o.After, o.Live)
	info.Result = begin.result
	h.fire(info)
	h.resumes.WithLabelValues(begin.result).Inc()
	if begin.reset != "" {
		data, _ := json.Marshal(map[string]string{"reason": begin.reset, "epoch": st.Epoch})
		id := ""
		if st.Epoch != "" {
			id = streams.Cursor{Epoch: st.Epoch}.String()
		}
		ew.event(id, string(wire.EventStreamReset), string(data))
	}
	s.epoch, s.last = begin.epoch, begin.after

	// Replay from Redis, then follow the shared feed, skipping what replay already sent. The
	// subscription came first, so every entry after the replay's last one reaches the feed.
	for {
		epoch, entries, err := h.reader.Read(ctx, sessionID, s.last, h.cfg.ReplayBatch)
		if err != nil {
			s.end("temporarily unavailable; reconnect", "unavailable")
			return false
		}
		if epoch != s.epoch {
			if s.epoch != "" || s.last != (streams.EntryID{}) {
				s.end("stream generation changed; reconnect", "epoch_changed")
				return false
			}
			s.epoch = epoch
		}
		for _, e := range entries {
			if s.send(&hub.Delivery{Epoch: epoch, Entry: e}) {
				_ = s.flush()
				return false
			}
		}
		if int64(len(entries)) < h.cfg.ReplayBatch {
			break
		}
		if s.flush() != nil {
			return false
		}
	}
	if s.flush() != nil {
		return false
	}
	s.live = true // from here on entries arrive as they are appended: their delivery lag is meaningful
	return true
}

func (h *Handler) fire(info OpenInfo) {
	if hk := h.hooks.Load(); hk != nil && hk.OnOpen != nil {
		hk.OnOpen(info)
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
	case st.Lost(cursor.ID):
		// Entries after the cursor were trimmed away: resuming would silently skip them.
		return start{epoch: st.Epoch, reset: "history_trimmed", result: "reset"}
	case st.LastID.Less(cursor.ID):
		// A cursor beyond anything this generation produced cannot have come from it.
		return start{epoch: st.Epoch, reset: "unknown_cursor", result: "reset"}
	}
	return start{after: cursor.ID, epoch: st.Epoch, result: "resumed"}
}

// stream is one connection's write state.
type stream struct {
	h     *Handler
	ew    *eventWriter
	out   sink
	epoch string
	last  streams.EntryID
	turn  string
	ctx   context.Context
	live  bool
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
