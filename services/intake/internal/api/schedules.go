package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/pkg/region"
	"github.com/turnstile-run/turnstile/pkg/wire"
	"github.com/turnstile-run/turnstile/services/intake/internal/schedule"
)

// Limits of the schedules routes.
const (
	// SchedulesMaxDefault is config.SchedulesMaxDefault: a tenant's most schedules.
	SchedulesMaxDefault = config.SchedulesMaxDefault
	// SchedulePageMax is the largest ?limit= of GET /v1/schedules.
	SchedulePageMax = 1000
	// schedulePageDefault is its page without ?limit=.
	schedulePageDefault = 20
)

func viewSchedule(s schedule.Schedule) wire.Schedule {
	v := wire.Schedule{
		ScheduleID: s.ID, Schedule: s.Cron, Timezone: s.Timezone, Turn: s.Turn, Metadata: s.Metadata,
		Enabled: s.Enabled, EndTime: s.EndTime, NextFireAt: s.NextFireAt, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt,
	}
	if s.SessionID != "" {
		v.SessionID = &s.SessionID
	}
	return v
}

// scheduleRequest is the body of POST and PATCH /v1/schedules…; nil members are unset.
type scheduleRequest struct {
	Schedule  *string         `json:"schedule"`
	Timezone  *string         `json:"timezone"`
	SessionID *string         `json:"session_id"`
	Turn      json.RawMessage `json:"turn"`
	Metadata  json.RawMessage `json:"metadata"`
	Enabled   *bool           `json:"enabled"`
	EndTime   json.RawMessage `json:"end_time"`
}

// readSchedule reads and checks a schedule body; create requires schedule and turn.
func (h *Handler) readSchedule(w http.ResponseWriter, r *http.Request, create bool) (scheduleRequest, *time.Time, *httpx.Problem) {
	var req scheduleRequest
	if !acceptableContentType(r.Header.Get("Content-Type")) {
		return req, nil, problem(httpx.ProblemUnsupportedType, "the body must be application/json")
	}
	raw, err := io.ReadAll(httpx.LimitBody(w, r, h.cfg.MaxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return req, nil, problem(httpx.ProblemBodyTooLarge, fmt.Sprintf("the body exceeds %d bytes", tooBig.Limit))
		}
		return req, nil, problem(httpx.ProblemInvalidBody, "the body could not be read")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, nil, problem(httpx.ProblemInvalidBody, "malformed JSON: "+err.Error())
	}
	bad := func(detail string) (scheduleRequest, *time.Time, *httpx.Problem) {
		return req, nil, problem(httpx.ProblemValidation, detail)
	}
	switch {
	case create && (req.Schedule == nil || *req.Schedule == ""):
		return bad("schedule (a cron expression) is required")
	case create && len(req.Turn) == 0:
		return bad("turn (the body of the turn each tick posts) is required")
	case !create && req.SessionID != nil:
		return bad("session_id cannot be changed: create a new schedule")
	case req.SessionID != nil && *req.SessionID != "" && !wire.SessionIDValid(*req.SessionID):
		return bad("session_id must be " + wire.SessionIDRule)
	case len(req.Metadata) > 0 && !isJSONObject(req.Metadata):
		return bad("metadata must be an object")
	}
	if req.Schedule != nil || req.Timezone != nil {
		expr, tz := "* * * * *", ""
		if req.Schedule != nil {
			expr = *req.Schedule
		}
		if req.Timezone != nil {
			tz = *req.Timezone
		}
		if _, err := schedule.ParseSpec(expr, tz); err != nil {
			return bad(err.Error())
		}
	}
	if len(req.Turn) > 0 {
		turn, p := parseTurn(req.Turn)
		if p != nil {
			p.Detail = "turn: " + p.Detail
			return req, nil, p
		}
		if p := checkWebhook(turn, h.cfg.WebhookAllowHTTP); p != nil {
			p.Detail = "turn: " + p.Detail
			return req, nil, p
		}
		switch {
		case turn.TurnID != "":
			return bad("turn.turn_id cannot be set: each tick's turn ID derives from the schedule and the tick")
		case turn.Deadline != nil:
			return bad("turn.deadline cannot be set: each tick's turn has intake's default deadline")
		}
		if _, reserved := turn.Metadata[schedule.MetadataKey]; reserved {
			return bad("turn.metadata." + schedule.MetadataKey + " is reserved: it names the schedule and tick of each fired turn")
		}
	}
	var end *time.Time
	if len(req.EndTime) > 0 && string(req.EndTime) != "null" {
		var t time.Time
		if err := json.Unmarshal(req.EndTime, &t); err != nil {
			return bad("end_time must be an RFC 3339 time or null")
		}
		end = &t
	}
	return req, end, nil
}

func isJSONObject(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(raw, &m) == nil && m != nil
}

func (h *Handler) schedulesDown(w http.ResponseWriter, r *http.Request, route string, err error) {
	h.d.Log.WarnContext(r.Context(), "schedule store failed", "route", route, "err", err)
	h.refuse(w, route, httpx.ProblemStoreUnavail.Problem("schedules are temporarily unavailable"))
}

func (h *Handler) createSchedule(w http.ResponseWriter, r *http.Request) {
	const route = "create_schedule"
	req, end, p := h.readSchedule(w, r, true)
	if p != nil {
		h.refuse(w, route, *p)
		return
	}
	if h.schedules == nil {
		h.refuse(w, route, httpx.ProblemStoreUnavail.Problem("schedules are unavailable"))
		return
	}
	s := schedule.Schedule{
		Tenant: tenantOf(r), ID: region.NewID(h.cfg.Region.Code), Cron: *req.Schedule, Turn: req.Turn,
		Metadata: req.Metadata, Enabled: true, EndTime: end,
	}
	if req.Timezone != nil {
		s.Timezone = *req.Timezone
	}
	if req.SessionID != nil {
		s.SessionID = *req.SessionID
	}
	if req.Enabled != nil {
		s.Enabled = *req.Enabled
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.StatusTimeout)
	defer cancel()
	out, err := h.schedules.Create(ctx, s, h.cfg.SchedulesMax)
	if errors.Is(err, schedule.ErrLimit) {
		h.refuse(w, route, httpx.ProblemSchedulesLimit.Problem(fmt.Sprintf(
			"the tenant has %d schedules, the most it may have (TURNSTILE_SCHEDULES_MAX): delete one first", h.cfg.SchedulesMax)))
		return
	}
	if err != nil {
		h.schedulesDown(w, r, route, err)
		return
	}
	h.requests.WithLabelValues(route, "ok").Inc()
	w.Header().Set("Location", "/v1/schedules/"+out.ID)
	httpx.WriteJSON(w, http.StatusCreated, viewSchedule(out))
}

func (h *Handler) getSchedule(w http.ResponseWriter, r *http.Request) {
	const route = "get_schedule"
	if h.schedules == nil {
		h.refuse(w, route, httpx.ProblemStoreUnavail.Problem("schedules are unavailable"))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.StatusTimeout)
	defer cancel()
	s, err := h.schedules.Get(ctx, tenantOf(r), chi.URLParam(r, "schedule_id"))
	if h.scheduleMissing(w, r, route, err) {
		return
	}
	h.requests.WithLabelValues(route, "ok").Inc()
	httpx.WriteJSON(w, http.StatusOK, viewSchedule(s))
}

// scheduleMissing answers err when it is not nil and reports whether it did.
func (h *Handler) scheduleMissing(w http.ResponseWriter, r *http.Request, route string, err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, schedule.ErrNotFound):
		h.refuse(w, route, httpx.ProblemScheduleNotFound.Problem("no such schedule"))
	default:
		h.schedulesDown(w, r, route, err)
	}
	return true
}

func (h *Handler) listSchedules(w http.ResponseWriter, r *http.Request) {
	const route = "list_schedules"
	q := r.URL.Query()
	f := schedule.Filter{Limit: schedulePageDefault, SessionID: q.Get("session_id"), Order: q.Get("sort_by"), Desc: q.Get("sort_order") == "desc"}
	bad := ""
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > SchedulePageMax {
			bad = fmt.Sprintf("limit must be an integer from 0 to %d", SchedulePageMax)
		}
		f.Limit = n
	}
	if v := q.Get("offset"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			bad = "offset must be a non-negative integer"
		}
		f.Offset = n
	}
	if v := q.Get("enabled"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			bad = "enabled must be true or false"
		}
		f.Enabled = &b
	}
	if v := q.Get("metadata"); v != "" {
		if !isJSONObject(json.RawMessage(v)) {
			bad = "metadata must be a JSON object (the schedules whose metadata contains it)"
		}
		f.Metadata = json.RawMessage(v)
	}
	switch f.Order {
	case "", "created_at", "updated_at", "next_fire_at":
	default:
		bad = "sort_by must be created_at, updated_at or next_fire_at"
	}
	if bad != "" {
		h.refuse(w, route, httpx.ProblemValidation.Problem(bad))
		return
	}
	if h.schedules == nil {
		h.refuse(w, route, httpx.ProblemStoreUnavail.Problem("schedules are unavailable"))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.StatusTimeout)
	defer cancel()
	ss, total, err := h.schedules.List(ctx, tenantOf(r), f)
	if err != nil {
		h.schedulesDown(w, r, route, err)
		return
	}
	page := wire.SchedulePage{Schedules: make([]wire.Schedule, len(ss)), Total: total}
	for i, s := range ss {
		page.Schedules[i] = viewSchedule(s)
	}
	h.requests.WithLabelValues(route, "ok").Inc()
	httpx.WriteJSON(w, http.StatusOK, page)
}

func (h *Handler) updateSchedule(w http.ResponseWriter, r *http.Request) {
	const route = "update_schedule"
	req, end, p := h.readSchedule(w, r, false)
	if p != nil {
		h.refuse(w, route, *p)
		return
	}
	if h.schedules == nil {
		h.refuse(w, route, httpx.ProblemStoreUnavail.Problem("schedules are unavailable"))
		return
	}
	patch := schedule.Patch{
		Cron: req.Schedule, Timezone: req.Timezone, Turn: req.Turn, Metadata: req.Metadata, Enabled: req.Enabled,
		EndTime: end, SetEndTime: len(req.EndTime) > 0,
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.StatusTimeout)
	defer cancel()
	s, err := h.schedules.Update(ctx, tenantOf(r), chi.URLParam(r, "schedule_id"), patch)
	if h.scheduleMissing(w, r, route, err) {
		return
	}
	h.requests.WithLabelValues(route, "ok").Inc()
	httpx.WriteJSON(w, http.StatusOK, viewSchedule(s))
}

func (h *Handler) deleteSchedule(w http.ResponseWriter, r *http.Request) {
	const route = "delete_schedule"
	if h.schedules == nil {
		h.refuse(w, route, httpx.ProblemStoreUnavail.Problem("schedules are unavailable"))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.StatusTimeout)
	defer cancel()
	if h.scheduleMissing(w, r, route, h.schedules.Delete(ctx, tenantOf(r), chi.URLParam(r, "schedule_id"))) {
		return
	}
	h.requests.WithLabelValues(route, "ok").Inc()
	w.WriteHeader(http.StatusNoContent)
}

// PostScheduled posts a schedule's tick through the accept path of POST
// /v1/sessions/{session_id}/turns, as tenant and with the idempotency key: the same admission,
// quotas, idempotency and Kafka write as a client's post (it is schedule.Poster).
func (h *Handler) PostScheduled(ctx context.Context, tenant, sessionID, idempotencyKey string, body []byte) (string, schedule.Outcome, string) {
	rctx := chi.NewRouteContext()
	rctx.URLParams.Add(httpx.SessionIDParam, sessionID)
	ctx = context.WithValue(context.WithValue(ctx, chi.RouteCtxKey, rctx), tenantKey{}, tenant)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "/v1/sessions/"+sessionID+"/turns", bytes.NewReader(body))
	if err != nil {
		return "", schedule.Refused, err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", idempotencyKey)
	var rec answer
	h.postTurn(&rec, req)
	out := schedule.OutcomeOf(rec.status)
	if out != schedule.Posted {
		return "", out, fmt.Sprintf("%d %s", rec.status, rec.body.String())
	}
	var a Accepted
	if err := json.Unmarshal(rec.body.Bytes(), &a); err != nil {
		return "", schedule.Refused, "unreadable answer: " + err.Error()
	}
	return a.TurnID, out, ""
}

// answer is the http.ResponseWriter of an in-process post.
type answer struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (a *answer) Header() http.Header {
	if a.header == nil {
		a.header = http.Header{}
	}
	return a.header
}

func (a *answer) WriteHeader(code int) {
	if a.status == 0 {
		a.status = code
	}
}

func (a *answer) Write(b []byte) (int, error) {
	a.WriteHeader(http.StatusOK)
	return a.body.Write(b)
}
