package sse

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/turnstile-run/turnstile/pkg/admission"
	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/pkg/lifecycle"
	"github.com/turnstile-run/turnstile/pkg/park"
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
	// Admission is the process's stream budget, shared with the other front doors of the process
	// (pkg/app's Deps.Admission). Nil makes the handler its own of MaxConnections, MaxPerSession
	// and MaxTenantShare, its metrics on the handler's registry.
	Admission *admission.Budget
	// MaxConnections caps this replica's open streams when Admission is nil. Defaults to
	// config.GatewayMaxConnectionsDefault.
	MaxConnections int
	// MaxPerSession caps one session's open streams on this replica when Admission is nil.
	// Defaults to config.GatewayMaxPerSessionDefault.
	MaxPerSession int
	// MaxTenantShare is the percentage of MaxConnections one tenant's streams may hold (at least
	// one stream) when Admission is nil; it applies to streams whose token names a tenant.
	// Defaults to config.GatewayMaxTenantShareDefault.
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

// Handler serves GET /v1/sessions/{session_id}/events: it parses a request to open a stream,
// authorizes it, admits it under the caps and opens it. Its embedded Streams tracks the admitted
// streams (Drain, Cut, Len); its lot parks the live ones.
type Handler struct {
	cfg    Config
	hub    *hub.Hub
	reader *streams.Reader
	log    *slog.Logger
	hooks  atomic.Pointer[Hooks]
	cors   map[string]bool
	anyOK  bool

	lifecycle.Streams
	budget *admission.Budget
	lot    *park.Lot

	connections prometheus.Gauge
	sent        prometheus.Counter
	resumes     *prometheus.CounterVec
	closed      *prometheus.CounterVec
	lag         prometheus.Histogram
}

// New returns a handler.
func New(cfg Config, h *hub.Hub, reader *streams.Reader, log *slog.Logger, reg prometheus.Registerer) *Handler {
	cfg.applyDefaults()
	hd := &Handler{
		cfg: cfg, hub: h, reader: reader, log: log, cors: map[string]bool{},
		Streams: lifecycle.Streams{DrainBatch: cfg.DrainBatch, DrainInterval: cfg.DrainInterval},
		budget:  cfg.Admission,
		lot: park.New(park.Config{
			KeepAlive: cfg.KeepAlive, Log: log,
			// The lot wakes the live streams of a newly revoked key.
			Signal: cfg.Revocations.Changed, Select: cfg.Revocations.Revoked,
		}),
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
	if hd.budget == nil {
		hd.budget = admission.New(admission.Config{
			MaxStreams: cfg.MaxConnections, MaxPerSession: cfg.MaxPerSession, TenantShare: cfg.MaxTenantShare,
			Retry: cfg.OverloadRetry,
		})
		hd.budget.Register(reg)
	}
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
func (h *Handler) Connections() int { return h.Len() }

// Drain (of the embedded Streams) refuses new streams (inside a 200, with a retry hint) and closes
// the open ones with a retry hint in batches of DrainBatch, a jittered DrainInterval apart, so
// clients resume on other replicas without arriving all at once; each closed stream also carries
// its own jittered retry. Cut closes them without draining: clients reconnect to this replica and
// resume from their cursors (tests use it to cut streams mid-turn).

// Wait blocks until every admitted stream has ended, and the goroutines that served them, or ctx
// is done. Streams on taken-over connections outlive their HTTP handlers, so a server's Shutdown
// does not wait for them: call Drain, then Wait.
func (h *Handler) Wait(ctx context.Context) error {
	if err := h.Streams.Wait(ctx); err != nil {
		return err
	}
	return h.lot.Wait(ctx)
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
	// The stream read is the tenant's session: its key (the default tenant's without tokens),
	// which only the tenant's token opens.
	o.Session = wire.NewSessionKey(claims.Tenant, o.SessionID)
	session, turnFilter, cursor := o.Session, o.TurnID, o.After
	ctx := r.Context()
	// A follower of one turn that reconnects after the turn's terminal event has everything: 204
	// tells EventSource to stop reconnecting.
	if turnFilter != "" && cursor != nil {
		if term, ok, err := h.reader.Terminal(ctx, session, turnFilter); err == nil && ok &&
			term.Epoch == cursor.Epoch && !cursor.ID.Less(term.ID) {
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}

	st, refusal := h.admit(session, claims, o.TurnID, r.Header.Get(admission.TicketHeader))
	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("X-Accel-Buffering", "no")
	if refusal != "" {
		info.Result = refusal
		h.refuse(w, info)
		return
	}
	h.openStream(w, r, st, o, info)
}

// admit takes a stream into the handler's books, or says why not: draining, or the cap that
// refuses it (pkg/admission). A stream a front door of this process opened with its ticket rides
// on the front door's slot: it is counted once, as that front door's.
func (h *Handler) admit(session wire.SessionKey, claims streamtoken.Claims, turn, ticket string) (*stream, string) {
	if h.Draining() {
		return nil, "draining"
	}
	var slot *admission.Slot
	if !h.budget.Backs(ticket, session) {
		var refusal admission.Refusal
		if slot, refusal = h.budget.Admit(admission.DoorGateway, session, claims.Tenant); refusal != "" {
			return nil, string(refusal)
		}
	}
	st := &stream{h: h, session: session, apiKey: claims.APIKeyID, turn: turn, slot: slot}
	// Drain and Cut wake the stream once it opened; it sees tracked.Done in its next round, or in
	// its first once live.
	st.tracked = h.Track(func() {
		if p := st.parked.Load(); p != nil {
			p.Wake(evClose)
		}
	})
	if h.Draining() {
		// The drain began after the check above: the stream is refused as it would have been.
		st.tracked.Release()
		slot.Release()
		return nil, "draining"
	}
	h.connections.Inc()
	return st, ""
}

// refuse answers a stream that was not admitted. Retryable refusals stay inside a 200:
// EventSource gives up for good on anything else.
func (h *Handler) refuse(w http.ResponseWriter, info OpenInfo) {
	w.WriteHeader(http.StatusOK)
	s := &stream{h: h, ew: newEventWriter(w), out: rcSink{w, http.NewResponseController(w)}}
	s.arm()
	h.fire(info)
	h.closed.WithLabelValues(info.Result).Inc()
	switch info.Result {
	case "draining":
		s.ew.retry(httpx.Jitter(h.cfg.Retry).Milliseconds())
		s.ew.comment("draining; reconnect")
	case string(admission.OverTenantShare):
		s.ew.retry(httpx.Jitter(h.cfg.OverloadRetry).Milliseconds())
		s.ew.comment("tenant over its share of this replica's streams; reconnect later")
	default:
		s.ew.retry(httpx.Jitter(h.cfg.OverloadRetry).Milliseconds())
		s.ew.comment("over capacity; reconnect later")
	}
	_ = s.flush()
}

// openStream serves an admitted stream. An idle stream should cost little. Over HTTP/1.x the
// handler takes the connection over and returns, so net/http releases its per-connection read and
// write buffers, request state and goroutine; the stream writes straight to the socket (the
// response is delimited by closing the connection). Once it has replayed and gone live it parks
// (pkg/park): no goroutine of its own, a short-lived one started by whatever wakes it. Where the
// connection cannot be taken (HTTP/2), the stream runs in the handler as usual.
func (h *Handler) openStream(w http.ResponseWriter, r *http.Request, st *stream, o openRequest, info OpenInfo) {
	ctx := r.Context()
	run := ctx //nolint:contextcheck // a taken-over stream outlives the request; it keeps only its trace
	nc, err := h.hijack(w, r)
	if err == nil {
		st.out = connSink{nc}
		// The request's context is not kept (its values, chi's pooled route context among them,
		// belong to the request): only its tracer provider and trace, for the spans of deliveries.
		run = telemetry.WithProvider(context.Background(), telemetry.Provider(ctx))
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			run = trace.ContextWithSpanContext(run, sc)
		}
	} else {
		nc = nil
		w.WriteHeader(http.StatusOK)
		st.out = rcSink{w, http.NewResponseController(w)}
	}
	st.ew = newEventWriter(st.out)
	st.ctx = run
	parked := h.lot.Enter(st.apiKey, nc, st.step, st.release)
	st.parked.Store(parked)
	// The first round looks at everything: entries that arrived during replay, a drain or
	// revocation that came before the stream was live.
	parked.Run(run, func(ctx context.Context) bool { return h.open(ctx, st, o, info) }, evFeed|evClose|park.Signal)
}

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
func (h *Handler) open(ctx context.Context, s *stream, o openRequest, info OpenInfo) bool {
	session := o.Session
	ew := s.ew
	s.arm()
	ew.retry(h.retryHint())

	sub, err := h.hub.SubscribeFunc(ctx, session, func() { s.parked.Load().Wake(evFeed) })
	if err != nil {
		if ctx.Err() == nil {
			h.log.Warn("subscribe failed", "session_id", o.SessionID, "tenant", session.Tenant(), "err", err)
		}
		s.end("temporarily unavailable; reconnect", "unavailable")
		return false
	}
	s.sub = sub

	st, err := h.reader.State(ctx, session)
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
		epoch, entries, err := h.reader.Read(ctx, session, s.last, h.cfg.ReplayBatch)
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

// retryHint is the jittered reconnect delay a stream starts with.
func (h *Handler) retryHint() int64 { return httpx.Jitter(h.cfg.Retry).Milliseconds() }
