package api

import (
	"bytes"
	"context"
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
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/pkg/telemetry"
	"github.com/turnstile-run/turnstile/pkg/turnstore"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

// Config tunes the handler.
type Config struct {
	Topic           string
	MaxBody         int64
	DefaultDeadline time.Duration
	MinUsefulTime   time.Duration
	ProduceTimeout  time.Duration
	// BacklogAge reports the current backlog age (pkg/backlog.Monitor.Age) for admission control.
	BacklogAge func() time.Duration
}

// Producer is the part of a Kafka client the handler uses.
type Producer interface {
	ProduceSync(ctx context.Context, rs ...*kgo.Record) kgo.ProduceResults
}

// Handler serves the intake API.
type Handler struct {
	cfg      Config
	producer Producer
	store    *turnstore.Store
	log      *slog.Logger
	requests *prometheus.CounterVec
	produce  prometheus.Histogram
	now      func() time.Time
}

// idempotencyNamespace derives turn IDs from idempotency keys (UUIDv5), so every retry of a request
// maps to the same turn without a round trip to any store.
var idempotencyNamespace = uuid.MustParse("6f0c6c1e-2a8e-5b8e-9d38-6b7c1d0a7f41")

// New returns a handler.
func New(cfg Config, producer Producer, store *turnstore.Store, log *slog.Logger, reg prometheus.Registerer) *Handler {
	h := &Handler{cfg: cfg, producer: producer, store: store, log: log, now: time.Now,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "turnstile_intake_requests_total",
			Help: "Intake requests by route and result (accepted, or the refusal's problem type)."}, []string{"route", "result"}),
		produce: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "turnstile_intake_produce_duration_seconds",
			Help: "Time from produce to Kafka acknowledgement.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}),
	}
	reg.MustRegister(h.requests, h.produce)
	return h
}

// Routes mounts the API.
func (h *Handler) Routes(r chi.Router) {
	r.Post("/v1/sessions/{session_id}/turns", h.postTurn)
	r.Get("/v1/turns/{turn_id}", h.getTurn)
}

// postTurnRequest is the body of POST /v1/sessions/{session_id}/turns.
type postTurnRequest struct {
	Input     *wire.Input    `json:"input"`
	Metadata  map[string]any `json:"metadata,omitempty"`
	Multitask string         `json:"multitask,omitempty"`
	TurnID    string         `json:"turn_id,omitempty"`
	Deadline  *int64         `json:"deadline,omitempty"`
}

// Accepted is the 202 body. It depends only on the turn's identity, so every retry of an idempotent
// request gets the same bytes.
type Accepted struct {
	TurnID      string `json:"turn_id"`
	SessionID   string `json:"session_id"`
	Status      string `json:"status"`
	StreamURL   string `json:"stream_url"`
	StreamToken string `json:"stream_token,omitempty"`
}

func (h *Handler) refuse(w http.ResponseWriter, route string, status int, typ, detail string) {
	h.requests.WithLabelValues(route, typ).Inc()
	problem(w, status, typ, detail)
}

func (h *Handler) postTurn(w http.ResponseWriter, r *http.Request) {
	const route = "post_turn"
	sessionID := chi.URLParam(r, "session_id")
	if !wire.SessionIDValid(sessionID) {
		h.refuse(w, route, http.StatusBadRequest, ProblemInvalidSession, "session_id must be 1-128 characters of [A-Za-z0-9._:-]")
		return
	}
	if !acceptableContentType(r.Header.Get("Content-Type")) {
		h.refuse(w, route, http.StatusUnsupportedMediaType, ProblemUnsupportedType, "the body must be application/json")
		return
	}
	req, status, typ, err := decodeTurn(http.MaxBytesReader(w, r.Body, h.cfg.MaxBody))
	if err != nil {
		h.refuse(w, route, status, typ, err.Error())
		return
	}
	now := h.now()
	deadline, err := h.deadline(r, req, now)
	if err != nil {
		h.refuse(w, route, http.StatusBadRequest, ProblemInvalidDeadline, err.Error())
		return
	}
	turnID, err := h.turnID(r, req, sessionID)
	if err != nil {
		h.refuse(w, route, http.StatusBadRequest, ProblemInvalidTurnID, err.Error())
		return
	}
	env := wire.Envelope{TurnID: turnID, SessionID: sessionID, Tenant: "default", Input: *req.Input,
		Metadata: req.Metadata, Multitask: req.Multitask, Deadline: deadline, AcceptedAt: now}
	value, err := env.Encode()
	if err != nil {
		h.refuse(w, route, http.StatusUnprocessableEntity, ProblemValidation, "metadata cannot be encoded: "+err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.ProduceTimeout)
	defer cancel()
	start := time.Now()
	rec := &kgo.Record{Topic: h.cfg.Topic, Key: []byte(sessionID), Value: value}
	telemetry.InjectRecord(r.Context(), rec)
	if err := h.producer.ProduceSync(ctx, rec).FirstErr(); err != nil {
		h.log.WarnContext(r.Context(), "produce failed", "session_id", sessionID, "turn_id", turnID, "err", err)
		h.requests.WithLabelValues(route, ProblemKafkaUnavail).Inc()
		unavailable(w, ProblemKafkaUnavail, "the turn could not be durably queued; retry with the same Idempotency-Key", 2*time.Second)
		return
	}
	h.produce.Observe(time.Since(start).Seconds())
	h.requests.WithLabelValues(route, "accepted").Inc()
	w.Header().Set("Location", "/v1/turns/"+turnID.String())
	httpx.WriteJSON(w, http.StatusAccepted, Accepted{
		TurnID:    turnID.String(),
		SessionID: sessionID,
		Status:    string(wire.StatusQueued),
		StreamURL: "/v1/sessions/" + url.PathEscape(sessionID) + "/events?turn_id=" + turnID.String(),
	})
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

// decodeTurn parses the body strictly: one JSON object, no unknown fields, input.text present.
func decodeTurn(body io.Reader) (postTurnRequest, int, string, error) {
	var req postTurnRequest
	raw, err := io.ReadAll(body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return req, http.StatusRequestEntityTooLarge, ProblemBodyTooLarge, fmt.Errorf("the body exceeds %d bytes", tooBig.Limit)
		}
		return req, http.StatusBadRequest, ProblemInvalidBody, errors.New("the body could not be read")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return req, http.StatusUnprocessableEntity, ProblemValidation, fmt.Errorf("field %q has the wrong type", typeErr.Field)
		}
		return req, http.StatusBadRequest, ProblemInvalidBody, fmt.Errorf("malformed JSON: %v", err)
	}
	if dec.More() {
		return req, http.StatusBadRequest, ProblemInvalidBody, errors.New("the body must hold exactly one JSON object")
	}
	switch {
	case req.Input == nil:
		return req, http.StatusUnprocessableEntity, ProblemValidation, errors.New("input is required")
	case req.Input.Text == "":
		return req, http.StatusUnprocessableEntity, ProblemValidation, errors.New("input.text is required")
	}
	switch req.Multitask {
	case "", "enqueue", "reject", "interrupt":
	default:
		return req, http.StatusUnprocessableEntity, ProblemValidation, fmt.Errorf("multitask %q is not one of enqueue, reject, interrupt", req.Multitask)
	}
	return req, 0, "", nil
}

// deadline is the header X-Deadline-Epoch-Ms, else the body's deadline (epoch ms), else now plus
// the default. A past deadline is refused.
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
		ms = *req.Deadline
	default:
		return now.Add(h.cfg.DefaultDeadline), nil
	}
	d := time.UnixMilli(ms)
	if !d.After(now) {
		return time.Time{}, errors.New("the deadline has already passed")
	}
	return d, nil
}

// turnID is the client-minted turn_id, else one derived from Idempotency-Key, else a fresh UUIDv7.
func (h *Handler) turnID(r *http.Request, req postTurnRequest, sessionID string) (uuid.UUID, error) {
	if req.TurnID != "" {
		id, err := uuid.Parse(req.TurnID)
		if err != nil || id == uuid.Nil {
			return uuid.Nil, errors.New("turn_id must be a UUID")
		}
		return id, nil
	}
	if key := r.Header.Get("Idempotency-Key"); key != "" {
		if len(key) > 255 {
			return uuid.Nil, errors.New("Idempotency-Key must be at most 255 characters")
		}
		return uuid.NewSHA1(idempotencyNamespace, []byte("default\x00"+sessionID+"\x00"+key)), nil
	}
	return uuid.NewV7()
}

func (h *Handler) getTurn(w http.ResponseWriter, r *http.Request) {
	const route = "get_turn"
	id, err := uuid.Parse(chi.URLParam(r, "turn_id"))
	if err != nil {
		h.refuse(w, route, http.StatusBadRequest, ProblemInvalidTurnID, "turn_id must be a UUID")
		return
	}
	if h.store == nil {
		h.refuse(w, route, http.StatusServiceUnavailable, ProblemStoreUnavail, "turn status is unavailable")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	t, err := h.store.Get(ctx, id)
	switch {
	case errors.Is(err, turnstore.ErrNotFound):
		h.refuse(w, route, http.StatusNotFound, ProblemTurnNotFound, "no turn with this ID has started yet")
		return
	case err != nil:
		h.log.WarnContext(r.Context(), "read turn failed", "turn_id", id, "err", err)
		h.requests.WithLabelValues(route, ProblemStoreUnavail).Inc()
		unavailable(w, ProblemStoreUnavail, "turn status is temporarily unavailable", time.Second)
		return
	}
	h.requests.WithLabelValues(route, "ok").Inc()
	httpx.WriteJSON(w, http.StatusOK, t)
}
