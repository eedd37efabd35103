package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-redis/redis_rate/v10"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/turnstile-run/turnstile/pkg/apikey"
	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/pkg/openapi"
	"github.com/turnstile-run/turnstile/pkg/streamtoken"
	"github.com/turnstile-run/turnstile/pkg/telemetry"
	"github.com/turnstile-run/turnstile/pkg/turnstore"
	"github.com/turnstile-run/turnstile/pkg/wire"
	"github.com/turnstile-run/turnstile/services/intake/internal/record"
)

// Config tunes the handler. Zero durations and limits are not defaulted here: intake.New passes
// the validated configuration.
type Config struct {
	Topic           string
	MaxBody         int64
	DefaultDeadline time.Duration
	MinUsefulTime   time.Duration
	ProduceTimeout  time.Duration
	// MaxBacklogAge refuses turns with 503 while BacklogAge reports more.
	MaxBacklogAge time.Duration
	// BacklogAge reports the current backlog age; nil means unknown, and intake admits.
	BacklogAge func() time.Duration
	// TenantRate and TenantBurst bound each tenant's accepted turns per second (GCRA in Redis).
	TenantRate, TenantBurst int
	// MaxQueuedTurns bounds each tenant's queued turns.
	MaxQueuedTurns int
	// IdempotencyTTL is how long an idempotency record lives in Redis.
	IdempotencyTTL time.Duration
	// RetryAfter is the base of a 503's jittered Retry-After.
	RetryAfter time.Duration
	// AuthEnabled requires an API key on every request; off, every request is DefaultTenant's.
	AuthEnabled bool
	// KeyPrefix starts intake's Redis keys.
	KeyPrefix string
}

// Producer is the part of a Kafka client the handler uses.
type Producer interface {
	Produce(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error))
}

// Deps are the handler's collaborators. Pool and Redis may be nil (or down): intake then fails open
// where it can (quotas, ownership, double-texting) and answers 503 where it cannot (status reads).
type Deps struct {
	Producer Producer
	Pool     *pgxpool.Pool
	Redis    redis.UniversalClient
	Signer   *streamtoken.Signer
	Recorder *record.Recorder
	Log      *slog.Logger
	Registry prometheus.Registerer
}

// Handler serves the intake API.
type Handler struct {
	cfg      Config
	d        Deps
	store    *turnstore.Store
	limiter  *redis_rate.Limiter
	idem     redis.Cmdable
	autopipe io.Closer
	keys     *keyCache
	owners   *owners
	queued   queuedCounts
	leases   rateLeases
	requests *prometheus.CounterVec
	failOpen *prometheus.CounterVec
	produce  prometheus.Histogram
	now      func() time.Time

	// postAccepted is requests{post_turn, accepted}, looked up once: it is counted on every accept.
	postAccepted prometheus.Counter
}

// idempotencyNamespace derives turn IDs from idempotency keys (UUIDv5), so every retry of a request
// maps to the same turn without a round trip to any store.
var idempotencyNamespace = uuid.MustParse("6f0c6c1e-2a8e-5b8e-9d38-6b7c1d0a7f41")

// New returns a handler.
func New(cfg Config, d Deps) *Handler {
	h := &Handler{
		cfg: cfg, d: d, now: time.Now,
		keys:   &keyCache{pool: d.Pool, m: map[[32]byte]keyEntry{}, now: time.Now},
		owners: &owners{pool: d.Pool, m: map[string]string{}},
		queued: queuedCounts{m: map[string]*queuedCount{}},
		leases: rateLeases{m: map[string]*rateLease{}},
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "turnstile_intake_requests_total",
			Help: "Intake requests by route and result (accepted, or the refusal's problem type).",
		}, []string{"route", "result"}),
		failOpen: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "turnstile_intake_fail_open_total",
			Help: "Checks intake skipped because their store did not answer (it admits rather than refuses), by check.",
		}, []string{"check"}),
		produce: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "turnstile_intake_produce_duration_seconds",
			Help: "Time from produce to Kafka acknowledgement.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}),
	}
	h.postAccepted = h.requests.WithLabelValues("post_turn", "accepted")
	if d.Pool != nil {
		h.store = turnstore.New(d.Pool)
	}
	h.idem = d.Redis
	if c, ok := d.Redis.(*redis.Client); ok {
		// Autopipelining coalesces the SET NX of concurrent requests into one round trip, which
		// the benchmark shows is most of intake's cost over a bare produce.
		if ap, err := c.AutoPipeline(); err == nil {
			h.idem, h.autopipe = ap, ap
		}
	}
	if d.Redis != nil {
		h.limiter = redis_rate.NewLimiter(d.Redis)
	}
	d.Registry.MustRegister(h.requests, h.failOpen, h.produce)
	return h
}

// Close releases the handler's Redis autopipeliner.
func (h *Handler) Close() error {
	if h.autopipe != nil {
		return h.autopipe.Close()
	}
	return nil
}

// Routes mounts the API and its OpenAPI document.
func (h *Handler) Routes(r chi.Router) {
	r.Get("/openapi.yaml", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		_, _ = w.Write(openapi.Spec)
	})
	r.Group(func(r chi.Router) {
		r.Use(h.authenticate)
		r.Post("/v1/sessions/{session_id}/turns", h.postTurn)
		r.Get("/v1/sessions/{session_id}/turns", h.listTurns)
		r.Get("/v1/turns/{turn_id}", h.getTurn)
		r.Post("/v1/turns/{turn_id}/cancel", h.cancelTurn)
	})
}

type tenantKey struct{}

func tenantOf(r *http.Request) string { return r.Context().Value(tenantKey{}).(string) }

// authenticate resolves the request's tenant from its API key (Authorization: Bearer).
func (h *Handler) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tenant := DefaultTenant
		if h.cfg.AuthEnabled {
			key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || key == "" {
				w.Header().Set("WWW-Authenticate", `Bearer realm="turnstile"`)
				h.refuse(w, "auth", http.StatusUnauthorized, ProblemUnauthorized, "an API key is required: Authorization: Bearer <key>")
				return
			}
			t, err := h.keys.tenant(r.Context(), key)
			switch {
			case errors.Is(err, apikey.ErrUnknown):
				w.Header().Set("WWW-Authenticate", `Bearer realm="turnstile", error="invalid_token"`)
				h.refuse(w, "auth", http.StatusUnauthorized, ProblemUnauthorized, "the API key is unknown or revoked")
				return
			case err != nil:
				h.log(r).WarnContext(r.Context(), "api key lookup failed", "err", err)
				h.requests.WithLabelValues("auth", ProblemStoreUnavail).Inc()
				unavailable(w, ProblemStoreUnavail, "API keys cannot be checked right now", h.cfg.RetryAfter)
				return
			}
			tenant = t
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tenantKey{}, tenant)))
	})
}

func (h *Handler) log(*http.Request) *slog.Logger { return h.d.Log }

// postTurnRequest is the body of POST /v1/sessions/{session_id}/turns.
type postTurnRequest struct {
	Input     *wire.Input    `json:"input"`
	Metadata  map[string]any `json:"metadata,omitempty"`
	Multitask string         `json:"multitask,omitempty"`
	TurnID    string         `json:"turn_id,omitempty"`
	Deadline  *int64         `json:"deadline,omitempty"`
}

// Accepted is the 202 body. It depends only on the turn's identity (and the stream token recorded
// with the idempotency key), so every retry of an idempotent request gets the same bytes.
type Accepted struct {
	TurnID      string `json:"turn_id"`
	SessionID   string `json:"session_id"`
	Status      string `json:"status"`
	StreamURL   string `json:"stream_url"`
	StreamToken string `json:"stream_token"`
}

func (h *Handler) refuse(w http.ResponseWriter, route string, status int, typ, detail string) {
	h.requests.WithLabelValues(route, typ).Inc()
	problem(w, status, typ, detail)
}

func (h *Handler) postTurn(w http.ResponseWriter, r *http.Request) {
	const route = "post_turn"
	tenant := tenantOf(r)
	sessionID := chi.URLParam(r, "session_id")
	if !wire.SessionIDValid(sessionID) {
		h.refuse(w, route, http.StatusBadRequest, ProblemInvalidSession, "session_id must be 1-128 characters of [A-Za-z0-9._:-]")
		return
	}
	if !acceptableContentType(r.Header.Get("Content-Type")) {
		h.refuse(w, route, http.StatusUnsupportedMediaType, ProblemUnsupportedType, "the body must be application/json")
		return
	}
	raw, req, pe := readTurn(http.MaxBytesReader(w, r.Body, h.cfg.MaxBody))
	if pe != nil {
		h.refuse(w, route, pe.status, pe.typ, pe.detail)
		return
	}
	now := h.now()
	deadline, err := h.deadline(r, req, now)
	if err != nil {
		h.refuse(w, route, http.StatusBadRequest, ProblemInvalidDeadline, err.Error())
		return
	}
	turnID, idemKey, err := h.turnID(r, req, tenant, sessionID)
	if err != nil {
		h.refuse(w, route, http.StatusBadRequest, ProblemInvalidTurnID, err.Error())
		return
	}
	ctx := r.Context()

	// Admission, cheapest first: local signals, then Redis, then Postgres.
	if age, ok := h.backlogAge(); ok {
		if age > h.cfg.MaxBacklogAge {
			h.requests.WithLabelValues(route, ProblemBacklog).Inc()
			unavailable(w, ProblemBacklog, fmt.Sprintf("the backlog is %s old, over the limit of %s", age.Round(time.Millisecond), h.cfg.MaxBacklogAge), h.cfg.RetryAfter)
			return
		}
		if deadline.Sub(now) < age+h.cfg.MinUsefulTime {
			h.requests.WithLabelValues(route, ProblemDeadlineUnreach).Inc()
			unavailable(w, ProblemDeadlineUnreach, fmt.Sprintf("the deadline cannot be met: turns wait about %s before they start", age.Round(time.Millisecond)), h.cfg.RetryAfter)
			return
		}
	}
	ownerKnown := true
	if owner, err := h.owners.claim(ctx, sessionID, tenant); err != nil {
		h.failOpen.WithLabelValues("session_owner").Inc()
		ownerKnown = false
	} else if owner != tenant {
		h.refuse(w, route, http.StatusNotFound, ProblemSessionNotFound, "no such session")
		return
	}
	if retry, ok := h.allowRate(ctx, tenant); !ok {
		h.requests.WithLabelValues(route, ProblemRateLimited).Inc()
		tooMany(w, ProblemRateLimited, fmt.Sprintf("tenant %s is over its rate of %d turns per second", tenant, h.cfg.TenantRate), retry)
		return
	}
	if n, ok := h.queuedTurns(ctx, tenant); ok && n >= h.cfg.MaxQueuedTurns {
		h.requests.WithLabelValues(route, ProblemQueueQuota).Inc()
		tooMany(w, ProblemQueueQuota, fmt.Sprintf("tenant %s has %d queued turns, its maximum is %d", tenant, n, h.cfg.MaxQueuedTurns), h.cfg.RetryAfter)
		return
	}
	if req.Multitask == "reject" {
		if busy, err := h.sessionBusy(ctx, sessionID, turnID); err != nil {
			h.failOpen.WithLabelValues("multitask_reject").Inc()
		} else if busy {
			h.refuse(w, route, http.StatusConflict, ProblemSessionBusy, "the session has a queued or running turn and multitask is reject")
			return
		}
	}
	token, reused := h.idempotency(ctx, idemKey, tenant, sessionID, raw)
	if reused {
		h.refuse(w, route, http.StatusUnprocessableEntity, ProblemIdempotencyReuse, "this idempotency key (or turn_id) was used with a different request body")
		return
	}

	env := wire.Envelope{
		TurnID: turnID, SessionID: sessionID, Tenant: tenant, Input: *req.Input,
		Metadata: req.Metadata, Multitask: req.Multitask, Deadline: deadline, AcceptedAt: now,
	}
	value, err := env.Encode()
	if err != nil {
		h.refuse(w, route, http.StatusUnprocessableEntity, ProblemValidation, "metadata cannot be encoded: "+err.Error())
		return
	}
	if err := h.produceRecord(ctx, &kgo.Record{Topic: h.cfg.Topic, Key: []byte(sessionID), Value: value}); err != nil {
		h.d.Log.WarnContext(ctx, "produce failed", "session_id", sessionID, "turn_id", turnID, "err", err)
		h.requests.WithLabelValues(route, ProblemKafkaUnavail).Inc()
		unavailable(w, ProblemKafkaUnavail, "the turn could not be durably queued in time; retry with the same Idempotency-Key", h.cfg.RetryAfter)
		return
	}
	h.recordQueued(env, !ownerKnown)
	if req.Multitask == "interrupt" {
		h.interrupt(ctx, sessionID, turnID, now)
	}
	h.postAccepted.Inc()
	if token == "" {
		token = h.d.Signer.Sign(tenant, sessionID)
	}
	w.Header().Set("Location", "/v1/turns/"+turnID.String())
	httpx.WriteJSON(w, http.StatusAccepted, Accepted{
		TurnID:      turnID.String(),
		SessionID:   sessionID,
		Status:      string(wire.StatusQueued),
		StreamURL:   "/v1/sessions/" + url.PathEscape(sessionID) + "/events?turn_id=" + turnID.String(),
		StreamToken: token,
	})
}

// produceRecord waits for Kafka's acknowledgement at most ProduceTimeout. A record still in flight
// when the wait ends may yet be written: the client was told 503 and retries with the same key, and
// the worker's claim makes the duplicate harmless.
func (h *Handler) produceRecord(ctx context.Context, rec *kgo.Record) error {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.ProduceTimeout)
	defer cancel()
	start := time.Now()
	telemetry.InjectRecord(ctx, rec)
	done := make(chan error, 1)
	h.d.Producer.Produce(ctx, rec, func(_ *kgo.Record, err error) { done <- err })
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("produce turn: %w", err)
		}
		h.produce.Observe(time.Since(start).Seconds())
		return nil
	case <-ctx.Done():
		return fmt.Errorf("produce turn: no acknowledgement: %w", context.Cause(ctx))
	}
}

// recordQueued hands the turn's queued row to the recorder; needSession when the session's owner
// could not be recorded before (Postgres did not answer the owner check).
func (h *Handler) recordQueued(env wire.Envelope, needSession bool) {
	if h.d.Recorder == nil {
		return
	}
	h.d.Recorder.Add(record.Row{
		TurnID: env.TurnID, SessionID: env.SessionID, Tenant: env.Tenant,
		AcceptedAt: env.AcceptedAt, Deadline: env.Deadline, NeedSession: needSession,
	})
}

func (h *Handler) backlogAge() (time.Duration, bool) {
	if h.cfg.BacklogAge == nil {
		return 0, false
	}
	return h.cfg.BacklogAge(), true
}

// redisBudget bounds every Redis call on the accept path, so a hung Redis costs a request at most
// this much before intake fails open.
const redisBudget = 250 * time.Millisecond

// allowRate applies the tenant's GCRA rate limit; when Redis does not answer it admits.
//
// To keep the accept path at about one Redis round trip, a replica takes a small lease of the
// tenant's tokens at a time (AllowN of rateChunk, at most 1% of the rate per lease, so the limit
// stays within about 1% of exact) and spends it locally for at most rateLeaseTTL; when the tenant is
// near its limit and a chunk is refused it falls back to asking for one token, so the limit is
// never exceeded, and a single token is not leased. One request at a time asks Redis for a
// tenant's next lease and the others wait for its answer: without that, every request that found
// the lease empty asked at once (one round trip and one GCRA script run each, the leases
// overwriting each other), which the benchmark showed as most of the limiter's cost.
func (h *Handler) allowRate(ctx context.Context, tenant string) (time.Duration, bool) {
	if h.limiter == nil {
		h.failOpen.WithLabelValues("rate").Inc()
		return 0, true
	}
	var l *rateLease
	for {
		now := h.now()
		h.leases.mu.Lock()
		l = h.leases.m[tenant]
		if l == nil {
			l = &rateLease{}
			h.leases.m[tenant] = l
		}
		if l.tokens > 0 && now.Before(l.expires) {
			l.tokens--
			h.leases.mu.Unlock()
			return 0, true
		}
		refill := l.refill
		if refill == nil {
			l.refill = make(chan struct{})
			h.leases.mu.Unlock()
			break // this request asks Redis
		}
		h.leases.mu.Unlock()
		select {
		case <-refill: // look again: the lease was refilled, or this request asks next
		case <-ctx.Done():
			h.failOpen.WithLabelValues("rate").Inc()
			return 0, true
		}
	}

	now := h.now()
	retry, ok, tokens := h.askRate(ctx, tenant)
	h.leases.mu.Lock()
	if tokens > 0 {
		l.tokens, l.expires = tokens, now.Add(rateLeaseTTL)
	}
	close(l.refill)
	l.refill = nil
	h.leases.mu.Unlock()
	return retry, ok
}

// askRate takes a chunk of the tenant's tokens from Redis (or one, near the limit) and returns the
// tokens left to lease after this request's.
func (h *Handler) askRate(ctx context.Context, tenant string) (retry time.Duration, ok bool, lease int) {
	ctx, cancel := context.WithTimeout(ctx, redisBudget)
	defer cancel()
	key := h.cfg.KeyPrefix + ":tenant:" + tenant
	limit := redis_rate.Limit{Rate: h.cfg.TenantRate, Burst: h.cfg.TenantBurst, Period: time.Second}
	chunk := min(max(h.cfg.TenantRate/100, 1), 64, h.cfg.TenantBurst)
	res, err := h.limiter.AllowN(ctx, key, limit, chunk)
	if err == nil && res.Allowed == 0 && chunk > 1 {
		res, err = h.limiter.AllowN(ctx, key, limit, 1)
	}
	if err != nil {
		h.failOpen.WithLabelValues("rate").Inc()
		return 0, true, 0
	}
	if res.Allowed == 0 {
		return res.RetryAfter, false, 0
	}
	return 0, true, res.Allowed - 1
}

// rateLeaseTTL bounds how long a replica spends a leased chunk of a tenant's rate tokens.
const rateLeaseTTL = 100 * time.Millisecond

type rateLeases struct {
	mu sync.Mutex
	m  map[string]*rateLease
}

type rateLease struct {
	tokens  int
	expires time.Time
	// refill is open while one request asks Redis for the next lease; it is closed when it has.
	refill chan struct{}
}

// idempotency records the body's hash under the turn's key (SET NX GET) and reports whether the key
// was used before with a different body; for a repeat of the same body it returns the stream token
// recorded by the first request, so every retry gets identical bytes. Without a key, or when Redis
// does not answer, it records nothing and admits.
func (h *Handler) idempotency(ctx context.Context, key, tenant, sessionID string, body []byte) (token string, reused bool) {
	if key == "" {
		return "", false
	}
	if h.idem == nil {
		h.failOpen.WithLabelValues("idempotency").Inc()
		return "", false
	}
	sum := sha256.New()
	sum.Write([]byte(sessionID))
	sum.Write([]byte{0})
	sum.Write(body)
	hash := hex.EncodeToString(sum.Sum(nil))
	token = h.d.Signer.Sign(tenant, sessionID)
	ctx, cancel := context.WithTimeout(ctx, redisBudget)
	defer cancel()
	prev, err := h.idem.SetArgs(ctx, key, hash+" "+token, redis.SetArgs{Mode: "NX", Get: true, TTL: h.cfg.IdempotencyTTL}).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return token, false // first use
	case err != nil:
		h.failOpen.WithLabelValues("idempotency").Inc()
		return token, false
	}
	prevHash, prevToken, _ := strings.Cut(prev, " ")
	if prevHash != hash {
		return "", true
	}
	if _, err := h.d.Signer.Verify(prevToken, sessionID); err != nil {
		return token, false // the recorded token expired (or its key was rotated out): a fresh one
	}
	return prevToken, false
}

// queuedCounts caches each tenant's number of queued turns for a second, so the quota costs one
// Postgres query per tenant per second per replica, not one per request: while one request
// refreshes a stale count, the others use the previous one.
type queuedCounts struct {
	mu sync.Mutex
	m  map[string]*queuedCount
}

type queuedCount struct {
	n          int
	at         time.Time
	known      bool
	refreshing bool
}

const queuedCountTTL = time.Second

func (h *Handler) queuedTurns(ctx context.Context, tenant string) (int, bool) {
	now := h.now()
	h.queued.mu.Lock()
	c := h.queued.m[tenant]
	if c == nil {
		c = &queuedCount{}
		h.queued.m[tenant] = c
	}
	if (c.known && now.Sub(c.at) < queuedCountTTL) || c.refreshing {
		n, known := c.n, c.known
		h.queued.mu.Unlock()
		return n, known
	}
	c.refreshing = true
	h.queued.mu.Unlock()

	n, err := h.countQueued(ctx, tenant)
	h.queued.mu.Lock()
	defer h.queued.mu.Unlock()
	c.refreshing = false
	if err != nil {
		h.failOpen.WithLabelValues("queued_quota").Inc()
		return 0, false
	}
	c.n, c.at, c.known = n, now, true
	return n, true
}

func (h *Handler) countQueued(ctx context.Context, tenant string) (int, error) {
	if h.d.Pool == nil {
		return 0, errStore
	}
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	var n int
	err := h.d.Pool.QueryRow(ctx, `SELECT count(*) FROM turns WHERE tenant = $1 AND status = 'queued'`, tenant).Scan(&n)
	return n, err
}

// sessionBusy reports whether the session has a queued or running turn other than turnID (which may
// be a retry of this very request).
func (h *Handler) sessionBusy(ctx context.Context, sessionID string, turnID uuid.UUID) (bool, error) {
	if h.d.Pool == nil {
		return false, errStore
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if h.d.Recorder != nil {
		h.d.Recorder.Flush(ctx)
	}
	var busy bool
	err := h.d.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM turns WHERE session_id = $1
		AND status IN ('queued', 'running') AND turn_id <> $2)`, sessionID, turnID).Scan(&busy)
	return busy, err
}

// interrupt requests cancellation of every live turn the session accepted before this one, so this
// turn runs next: the running turn's worker sees the request at its next lease renewal, and queued
// ones end as cancelled at their claim.
func (h *Handler) interrupt(ctx context.Context, sessionID string, turnID uuid.UUID, acceptedAt time.Time) {
	if h.d.Pool == nil {
		h.failOpen.WithLabelValues("multitask_interrupt").Inc()
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if h.d.Recorder != nil {
		h.d.Recorder.Flush(ctx)
	}
	tag, err := h.d.Pool.Exec(ctx, `UPDATE turns SET cancel_requested = true, updated_at = now()
		WHERE session_id = $1 AND status IN ('queued', 'running') AND turn_id <> $2 AND accepted_at <= $3
		  AND NOT cancel_requested`, sessionID, turnID, acceptedAt)
	if err != nil {
		h.failOpen.WithLabelValues("multitask_interrupt").Inc()
		h.d.Log.WarnContext(ctx, "interrupt: cancel of earlier turns failed", "session_id", sessionID, "err", err)
		return
	}
	h.d.Log.DebugContext(ctx, "interrupt: cancel requested", "session_id", sessionID, "turns", tag.RowsAffected())
}

// acceptableContentType allows JSON media types and no header at all. It also allows
// application/x-www-form-urlencoded, which `curl -d` sends by default, because the body is parsed as
// strict JSON either way: a real form body fails that parse with a 400. Everything else is a 415.
func acceptableContentType(ct string) bool {
	if ct == "" {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || mt == "application/x-www-form-urlencoded" ||
		(strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))
}

type parseError struct {
	status int
	typ    string
	detail string
}

// readTurn reads the body and parses it strictly; it returns the raw bytes for the idempotency hash.
func readTurn(body io.Reader) ([]byte, postTurnRequest, *parseError) {
	raw, err := io.ReadAll(body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, postTurnRequest{}, &parseError{http.StatusRequestEntityTooLarge, ProblemBodyTooLarge, fmt.Sprintf("the body exceeds %d bytes", tooBig.Limit)}
		}
		return nil, postTurnRequest{}, &parseError{http.StatusBadRequest, ProblemInvalidBody, "the body could not be read"}
	}
	req, pe := parseTurn(raw)
	return raw, req, pe
}

// parseTurn parses a body strictly: one JSON object, no unknown fields, input.text present, a known
// multitask strategy.
func parseTurn(raw []byte) (postTurnRequest, *parseError) {
	var req postTurnRequest
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return req, &parseError{http.StatusUnprocessableEntity, ProblemValidation, fmt.Sprintf("field %q has the wrong type", typeErr.Field)}
		}
		return req, &parseError{http.StatusBadRequest, ProblemInvalidBody, "malformed JSON: " + err.Error()}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return req, &parseError{http.StatusBadRequest, ProblemInvalidBody, "the body must hold exactly one JSON object"}
	}
	switch {
	case req.Input == nil:
		return req, &parseError{http.StatusUnprocessableEntity, ProblemValidation, "input is required"}
	case strings.TrimSpace(req.Input.Text) == "":
		return req, &parseError{http.StatusUnprocessableEntity, ProblemValidation, "input.text is required"}
	}
	switch req.Multitask {
	case "", "enqueue", "reject", "interrupt":
	default:
		return req, &parseError{http.StatusUnprocessableEntity, ProblemValidation, fmt.Sprintf("multitask %q is not one of enqueue, reject, interrupt", req.Multitask)}
	}
	return req, nil
}

// deadline is the header X-Deadline-Epoch-Ms, else the body's deadline (epoch ms), else now plus
// the default. A malformed or past deadline is refused.
func (h *Handler) deadline(r *http.Request, req postTurnRequest, now time.Time) (time.Time, error) {
	var ms int64
	switch v := r.Header.Get("X-Deadline-Epoch-Ms"); {
	case v != "":
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return time.Time{}, errors.New("X-Deadline-Epoch-Ms must be a positive integer of milliseconds since the epoch")
		}
		ms = n
	case req.Deadline != nil:
		if *req.Deadline <= 0 {
			return time.Time{}, errors.New("deadline must be a positive integer of milliseconds since the epoch")
		}
		ms = *req.Deadline
	default:
		return now.Add(h.cfg.DefaultDeadline), nil
	}
	if ms > 253402300799999 { // 9999-12-31
		return time.Time{}, errors.New("the deadline is too far in the future")
	}
	d := time.UnixMilli(ms)
	if !d.After(now) {
		return time.Time{}, errors.New("the deadline has already passed")
	}
	return d, nil
}

// turnID is the client-minted turn_id, else one derived from Idempotency-Key (UUIDv5 of tenant,
// session and key), else a fresh UUIDv7. The second result is the Redis key of the idempotency
// record, empty when the request has neither.
func (h *Handler) turnID(r *http.Request, req postTurnRequest, tenant, sessionID string) (uuid.UUID, string, error) {
	var id uuid.UUID
	switch key := r.Header.Get("Idempotency-Key"); {
	case req.TurnID != "":
		parsed, err := uuid.Parse(req.TurnID)
		if err != nil || parsed == uuid.Nil {
			return uuid.Nil, "", errors.New("turn_id must be a UUID")
		}
		id = parsed
	case key != "":
		if len(key) > 255 {
			return uuid.Nil, "", errors.New("Idempotency-Key must be at most 255 characters")
		}
		id = uuid.NewSHA1(idempotencyNamespace, []byte(tenant+"\x00"+sessionID+"\x00"+key))
	default:
		v7, err := uuid.NewV7()
		return v7, "", err
	}
	return id, h.cfg.KeyPrefix + ":idem:{" + tenant + "}:" + id.String(), nil
}

// turnView is a turn as the API shows it.
type turnView = turnstore.Turn

func (h *Handler) getTurn(w http.ResponseWriter, r *http.Request) {
	const route = "get_turn"
	t, ok := h.readTurn(w, r, route)
	if !ok {
		return
	}
	h.requests.WithLabelValues(route, "ok").Inc()
	httpx.WriteJSON(w, http.StatusOK, t)
}

// readTurn loads the path's turn for the request's tenant, answering the refusal itself when it
// cannot. A turn intake accepted moments ago may still sit in this replica's queued-row buffer, so a
// miss flushes it and reads again.
func (h *Handler) readTurn(w http.ResponseWriter, r *http.Request, route string) (turnView, bool) {
	id, err := uuid.Parse(chi.URLParam(r, "turn_id"))
	if err != nil {
		h.refuse(w, route, http.StatusBadRequest, ProblemInvalidTurnID, "turn_id must be a UUID")
		return turnView{}, false
	}
	if h.store == nil {
		h.requests.WithLabelValues(route, ProblemStoreUnavail).Inc()
		unavailable(w, ProblemStoreUnavail, "turn status is unavailable", h.cfg.RetryAfter)
		return turnView{}, false
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	t, err := h.store.Get(ctx, id)
	if errors.Is(err, turnstore.ErrNotFound) && h.d.Recorder != nil {
		h.d.Recorder.Flush(ctx)
		t, err = h.store.Get(ctx, id)
	}
	switch {
	case errors.Is(err, turnstore.ErrNotFound) || (err == nil && t.Tenant != tenantOf(r)):
		h.refuse(w, route, http.StatusNotFound, ProblemTurnNotFound, "no such turn")
		return turnView{}, false
	case err != nil:
		h.d.Log.WarnContext(r.Context(), "read turn failed", "turn_id", id, "err", err)
		h.requests.WithLabelValues(route, ProblemStoreUnavail).Inc()
		unavailable(w, ProblemStoreUnavail, "turn status is temporarily unavailable", h.cfg.RetryAfter)
		return turnView{}, false
	}
	return t, true
}

// CancelAccepted is the 202 body of a cancel.
type CancelAccepted struct {
	TurnID          string `json:"turn_id"`
	Status          string `json:"status"`
	CancelRequested bool   `json:"cancel_requested"`
}

// cancelTurn requests cancellation. It is never refused for capacity; it is idempotent, and on a
// finished turn it changes nothing and reports the final status.
func (h *Handler) cancelTurn(w http.ResponseWriter, r *http.Request) {
	const route = "cancel_turn"
	t, ok := h.readTurn(w, r, route)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	live, err := h.store.RequestCancel(ctx, t.TurnID, t.SessionID, t.Tenant)
	if err != nil {
		h.d.Log.WarnContext(r.Context(), "cancel failed", "turn_id", t.TurnID, "err", err)
		h.requests.WithLabelValues(route, ProblemStoreUnavail).Inc()
		unavailable(w, ProblemStoreUnavail, "the cancel request could not be recorded; retry", h.cfg.RetryAfter)
		return
	}
	if live {
		if t2, err := h.store.Get(ctx, t.TurnID); err == nil {
			t = t2
		}
	}
	h.requests.WithLabelValues(route, "accepted").Inc()
	httpx.WriteJSON(w, http.StatusAccepted, CancelAccepted{
		TurnID: t.TurnID.String(), Status: string(t.Status),
		CancelRequested: live || t.CancelReq,
	})
}

// TurnPage is a page of a session's turns, newest first.
type TurnPage struct {
	Turns      []turnView `json:"turns"`
	NextCursor string     `json:"next_cursor,omitempty"`
}

func (h *Handler) listTurns(w http.ResponseWriter, r *http.Request) {
	const route = "list_turns"
	sessionID := chi.URLParam(r, "session_id")
	if !wire.SessionIDValid(sessionID) {
		h.refuse(w, route, http.StatusBadRequest, ProblemInvalidSession, "session_id must be 1-128 characters of [A-Za-z0-9._:-]")
		return
	}
	limit := 20
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			h.refuse(w, route, http.StatusBadRequest, ProblemValidation, "limit must be an integer from 1 to 100")
			return
		}
		limit = n
	}
	var before time.Time
	if v := r.URL.Query().Get("cursor"); v != "" {
		us, err := strconv.ParseInt(v, 36, 64)
		if err != nil || us <= 0 {
			h.refuse(w, route, http.StatusBadRequest, ProblemInvalidCursor, "cursor must be a next_cursor this API returned")
			return
		}
		before = time.UnixMicro(us)
	}
	if h.store == nil {
		h.requests.WithLabelValues(route, ProblemStoreUnavail).Inc()
		unavailable(w, ProblemStoreUnavail, "turn status is unavailable", h.cfg.RetryAfter)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if h.d.Recorder != nil {
		h.d.Recorder.Flush(ctx)
	}
	owner, err := h.owners.lookup(ctx, sessionID)
	if err == nil && owner != tenantOf(r) {
		h.refuse(w, route, http.StatusNotFound, ProblemSessionNotFound, "no such session")
		return
	}
	var turns []turnView
	if err == nil {
		turns, err = h.store.ListSession(ctx, sessionID, before, limit)
	}
	if err != nil {
		h.d.Log.WarnContext(r.Context(), "list turns failed", "session_id", sessionID, "err", err)
		h.requests.WithLabelValues(route, ProblemStoreUnavail).Inc()
		unavailable(w, ProblemStoreUnavail, "turn status is temporarily unavailable", h.cfg.RetryAfter)
		return
	}
	page := TurnPage{Turns: turns}
	if page.Turns == nil {
		page.Turns = []turnView{}
	}
	if len(turns) == limit {
		page.NextCursor = strconv.FormatInt(turns[len(turns)-1].AcceptedAt.UnixMicro(), 36)
	}
	h.requests.WithLabelValues(route, "ok").Inc()
	httpx.WriteJSON(w, http.StatusOK, page)
}
