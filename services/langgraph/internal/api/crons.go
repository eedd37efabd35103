package api

import (
	"encoding/json"
	"maps"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/turnstile-run/turnstile/pkg/frontdoor"
	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/pkg/wire"
	"github.com/turnstile-run/turnstile/services/langgraph/internal/render"
)

// Crons are the native API's schedules (/v1/schedules, fired by intake's scheduler): a cron on a
// thread posts each tick's run to the thread's session; a cron without one posts each tick's run
// to a new session (the Platform's stateless cron, on_run_completed "delete": that session is not
// kept as a thread). The schedule's metadata holds the cron's own metadata and, under
// metaKey, what the cron was created with.

// cronMeta is the member metaKey of a schedule's metadata.
type cronMeta struct {
	AssistantID string          `json:"assistant_id"`
	ThreadID    string          `json:"thread_id,omitempty"`
	Input       json.RawMessage `json:"input,omitempty"`
	Multitask   string          `json:"multitask_strategy,omitempty"`
	StreamMode  []render.Mode   `json:"stream_mode,omitempty"`
}

// cronJSON is LangGraph's Cron.
type cronJSON struct {
	CronID         string         `json:"cron_id"`
	AssistantID    string         `json:"assistant_id"`
	ThreadID       *string        `json:"thread_id"`
	OnRunCompleted *string        `json:"on_run_completed,omitempty"`
	EndTime        *time.Time     `json:"end_time"`
	Schedule       string         `json:"schedule"`
	Timezone       string         `json:"timezone"`
	CreatedAt      time.Time      `json:"created_at"`
	UpdatedAt      time.Time      `json:"updated_at"`
	Payload        map[string]any `json:"payload"`
	UserID         *string        `json:"user_id"`
	NextRunDate    *time.Time     `json:"next_run_date"`
	Metadata       map[string]any `json:"metadata"`
	Enabled        bool           `json:"enabled"`
}

func viewCron(s frontdoor.Schedule) cronJSON {
	var cm cronMeta
	md := splitMeta(s.Metadata, &cm)
	c := cronJSON{
		CronID: s.ScheduleID, AssistantID: cm.AssistantID, EndTime: s.EndTime, Schedule: s.Schedule,
		Timezone: s.Timezone, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt, NextRunDate: s.NextFireAt,
		Metadata: md, Enabled: s.Enabled,
		Payload: map[string]any{"assistant_id": cm.AssistantID, "input": cm.Input, "metadata": md, "multitask_strategy": cm.Multitask},
	}
	if s.SessionID != nil {
		c.ThreadID = s.SessionID
	} else {
		del := "delete"
		c.OnRunCompleted = &del
	}
	return c
}

// cronBody is what crons.create, createForThread and update send (the rest is ignored: config,
// context, durability and checkpoint_during have no meaning for turnstile's runs).
type cronBody struct {
	Schedule        *string         `json:"schedule"`
	Timezone        *string         `json:"timezone"`
	EndTime         json.RawMessage `json:"end_time"`
	AssistantID     string          `json:"assistant_id"`
	Input           json.RawMessage `json:"input"`
	Metadata        map[string]any  `json:"metadata"`
	Enabled         *bool           `json:"enabled"`
	Multitask       string          `json:"multitask_strategy"`
	StreamMode      json.RawMessage `json:"stream_mode"`
	Webhook         json.RawMessage `json:"webhook"`
	InterruptBefore json.RawMessage `json:"interrupt_before"`
	InterruptAfter  json.RawMessage `json:"interrupt_after"`
	OnRunCompleted  string          `json:"on_run_completed"`
}

// refusal is what makes a cron body unacceptable, or "".
func (b cronBody) refusal(create bool) string {
	switch {
	case create && (b.Schedule == nil || *b.Schedule == ""):
		return "schedule (a cron expression) is required"
	case create && b.AssistantID == "":
		return "assistant_id is required"
	case b.Multitask == "rollback":
		return "multitask_strategy rollback is not supported on crons: use interrupt or reject"
	case b.Multitask != "" && b.Multitask != "reject" && b.Multitask != "enqueue" && b.Multitask != "interrupt":
		return "multitask_strategy must be reject, enqueue or interrupt"
	case isSet(b.Webhook):
		return "webhook is not supported on crons"
	case isSet(b.InterruptBefore) || isSet(b.InterruptAfter):
		return "interrupt_before and interrupt_after are not supported"
	case b.OnRunCompleted == "keep":
		return `on_run_completed "keep" is not supported: each tick of a cron without a thread runs on a new session that is not kept as a thread ("delete")`
	case b.OnRunCompleted != "" && b.OnRunCompleted != "delete":
		return `on_run_completed must be "delete"`
	}
	if _, reserved := b.Metadata[metaKey]; reserved {
		return "metadata." + metaKey + " is reserved"
	}
	return ""
}

// turn is the native turn each tick posts, and the cron's record of what it was created with.
func (b cronBody) turn(threadID string) (*frontdoor.TurnRequest, cronMeta, string) {
	text, refusal := inputText(b.Input)
	if refusal != "" {
		return nil, cronMeta{}, refusal
	}
	modes, err := render.ParseModes(b.StreamMode)
	if err != nil {
		return nil, cronMeta{}, err.Error()
	}
	if b.Multitask == "" {
		b.Multitask = "reject" // LangGraph's default
	}
	md := maps.Clone(b.Metadata)
	if md == nil {
		md = map[string]any{}
	}
	md[metaKey] = runMeta{AssistantID: b.AssistantID, StreamMode: modes, Multitask: b.Multitask}
	cm := cronMeta{AssistantID: b.AssistantID, ThreadID: threadID, Input: b.Input, Multitask: b.Multitask, StreamMode: modes}
	return &frontdoor.TurnRequest{Input: wire.Input{Text: text}, Metadata: md, Multitask: b.Multitask}, cm, ""
}

// scheduleMeta is a schedule's metadata: the cron's own and cm under metaKey.
func scheduleMeta(own map[string]any, cm cronMeta) map[string]any {
	md := maps.Clone(own)
	if md == nil {
		md = map[string]any{}
	}
	md[metaKey] = cm
	return md
}

// createCron answers POST /runs/crons (crons.create) and POST /threads/{thread_id}/runs/crons
// (crons.createForThread).
func (h *Handler) createCron(w http.ResponseWriter, r *http.Request) {
	const route = "create_cron"
	c, p := h.authenticate(r)
	if p != nil {
		h.refuse(w, route, *p)
		return
	}
	var body cronBody
	if p := h.decodeBody(w, r, &body); p != nil {
		h.refuse(w, route, *p)
		return
	}
	if refusal := body.refusal(true); refusal != "" {
		h.refuse(w, route, httpx.ProblemValidation.Problem(refusal))
		return
	}
	agent, ok := h.agentOf(body.AssistantID)
	if !ok {
		h.refuse(w, route, httpx.ProblemAssistantNotFound.Problem("no assistant "+body.AssistantID+" (TURNSTILE_LANGGRAPH_ASSISTANTS)"))
		return
	}
	threadID := chi.URLParam(r, "thread_id")
	if threadID != "" {
		if _, p := h.loadThread(r, c, threadID); p != nil {
			h.refuse(w, route, *p)
			return
		}
	}
	turn, cm, refusal := body.turn(threadID)
	if refusal != "" {
		h.refuse(w, route, httpx.ProblemValidation.Problem(refusal))
		return
	}
	turn.Agent = agent // each fire's turn goes to the assistant's agent
	req := frontdoor.ScheduleRequest{
		Schedule: body.Schedule, Timezone: body.Timezone, SessionID: threadID, Turn: turn,
		Metadata: scheduleMeta(body.Metadata, cm), Enabled: body.Enabled, EndTime: body.EndTime,
	}
	s, err := h.fd.CreateSchedule(r.Context(), c.cred, req)
	if err != nil {
		h.relay(w, r, route, err)
		return
	}
	h.ok(route)
	httpx.WriteJSON(w, http.StatusOK, viewCron(s))
}

// updateCron answers PATCH /runs/crons/{cron_id} (crons.update).
func (h *Handler) updateCron(w http.ResponseWriter, r *http.Request) {
	const route = "update_cron"
	c, p := h.authenticate(r)
	if p != nil {
		h.refuse(w, route, *p)
		return
	}
	var body cronBody
	if p := h.decodeBody(w, r, &body); p != nil {
		h.refuse(w, route, *p)
		return
	}
	if refusal := body.refusal(false); refusal != "" {
		h.refuse(w, route, httpx.ProblemValidation.Problem(refusal))
		return
	}
	id := chi.URLParam(r, "cron_id")
	cur, err := h.fd.GetSchedule(r.Context(), c.cred, id)
	if err != nil {
		h.relay(w, r, route, err)
		return
	}
	old := viewCron(cur)
	req := frontdoor.ScheduleRequest{Schedule: body.Schedule, Timezone: body.Timezone, Enabled: body.Enabled, EndTime: body.EndTime}
	if isSet(body.Input) || body.Metadata != nil || isSet(body.StreamMode) {
		// The turn is rebuilt from what changed and what the cron was created with.
		var cm cronMeta
		splitMeta(cur.Metadata, &cm)
		next := cronBody{AssistantID: old.AssistantID, Input: cm.Input, Metadata: old.Metadata, Multitask: cm.Multitask, StreamMode: body.StreamMode}
		if isSet(body.Input) {
			next.Input = body.Input
		}
		if body.Metadata != nil {
			next.Metadata = body.Metadata
		}
		if !isSet(next.StreamMode) && len(cm.StreamMode) > 0 {
			next.StreamMode, _ = json.Marshal(cm.StreamMode)
		}
		threadID := ""
		if cur.SessionID != nil {
			threadID = *cur.SessionID
		}
		turn, ncm, refusal := next.turn(threadID)
		if refusal != "" {
			h.refuse(w, route, httpx.ProblemValidation.Problem(refusal))
			return
		}
		turn.Agent, _ = h.agentOf(next.AssistantID)
		req.Turn, req.Metadata = turn, scheduleMeta(next.Metadata, ncm)
	}
	s, err := h.fd.UpdateSchedule(r.Context(), c.cred, id, req)
	if err != nil {
		h.relay(w, r, route, err)
		return
	}
	h.ok(route)
	httpx.WriteJSON(w, http.StatusOK, viewCron(s))
}

// deleteCron answers DELETE /runs/crons/{cron_id} (crons.delete); the runs it made stay.
func (h *Handler) deleteCron(w http.ResponseWriter, r *http.Request) {
	const route = "delete_cron"
	c, p := h.authenticate(r)
	if p != nil {
		h.refuse(w, route, *p)
		return
	}
	if err := h.fd.DeleteSchedule(r.Context(), c.cred, chi.URLParam(r, "cron_id")); err != nil {
		h.relay(w, r, route, err)
		return
	}
	h.ok(route)
	w.WriteHeader(http.StatusNoContent)
}

// cronQuery is the body of crons.search and crons.count.
type cronQuery struct {
	AssistantID string         `json:"assistant_id"`
	ThreadID    string         `json:"thread_id"`
	Enabled     *bool          `json:"enabled"`
	Limit       *int           `json:"limit"`
	Offset      int            `json:"offset"`
	SortBy      string         `json:"sort_by"`
	SortOrder   string         `json:"sort_order"`
	Metadata    map[string]any `json:"metadata"`
	Select      []string       `json:"select"`
}

// cronSorts maps crons.search's sort_by to the native API's.
var cronSorts = map[string]string{"": "", "created_at": "created_at", "updated_at": "updated_at", "next_run_date": "next_fire_at"}

// nativeQuery is q as a native schedule query, or a refusal.
func (q cronQuery) nativeQuery() (frontdoor.ScheduleQuery, string) {
	sort, ok := cronSorts[q.SortBy]
	switch {
	case !ok:
		return frontdoor.ScheduleQuery{}, "sort_by must be created_at, updated_at or next_run_date"
	case q.SortOrder != "" && q.SortOrder != "asc" && q.SortOrder != "desc":
		return frontdoor.ScheduleQuery{}, "sort_order must be asc or desc"
	case q.Offset < 0:
		return frontdoor.ScheduleQuery{}, "offset must not be negative"
	}
	if _, reserved := q.Metadata[metaKey]; reserved {
		return frontdoor.ScheduleQuery{}, "metadata." + metaKey + " is reserved"
	}
	nq := frontdoor.ScheduleQuery{SessionID: q.ThreadID, Enabled: q.Enabled, Offset: q.Offset, SortBy: sort, Desc: q.SortOrder == "desc", Limit: 10}
	if q.Limit != nil {
		if *q.Limit < 1 || *q.Limit > 1000 {
			return frontdoor.ScheduleQuery{}, "limit must be from 1 to 1000"
		}
		nq.Limit = *q.Limit
	}
	nq.Metadata = maps.Clone(q.Metadata)
	if q.AssistantID != "" {
		if nq.Metadata == nil {
			nq.Metadata = map[string]any{}
		}
		nq.Metadata[metaKey] = map[string]string{"assistant_id": q.AssistantID}
	}
	return nq, ""
}

// searchCrons answers POST /runs/crons/search (crons.search).
func (h *Handler) searchCrons(w http.ResponseWriter, r *http.Request) {
	const route = "search_crons"
	c, p := h.authenticate(r)
	if p != nil {
		h.refuse(w, route, *p)
		return
	}
	var q cronQuery
	if p := h.decodeBody(w, r, &q); p != nil {
		h.refuse(w, route, *p)
		return
	}
	nq, refusal := q.nativeQuery()
	if refusal != "" {
		h.refuse(w, route, httpx.ProblemValidation.Problem(refusal))
		return
	}
	page, err := h.fd.ListSchedules(r.Context(), c.cred, nq)
	if err != nil {
		h.relay(w, r, route, err)
		return
	}
	out := make([]cronJSON, len(page.Schedules))
	for i, s := range page.Schedules {
		out[i] = viewCron(s)
	}
	h.ok(route)
	httpx.WriteJSON(w, http.StatusOK, out)
}

// countCrons answers POST /runs/crons/count (crons.count).
func (h *Handler) countCrons(w http.ResponseWriter, r *http.Request) {
	const route = "count_crons"
	c, p := h.authenticate(r)
	if p != nil {
		h.refuse(w, route, *p)
		return
	}
	var q cronQuery
	if p := h.decodeBody(w, r, &q); p != nil {
		h.refuse(w, route, *p)
		return
	}
	q.Limit, q.SortBy, q.SortOrder, q.Offset = nil, "", "", 0
	nq, refusal := q.nativeQuery()
	if refusal != "" {
		h.refuse(w, route, httpx.ProblemValidation.Problem(refusal))
		return
	}
	nq.Limit = 0
	page, err := h.fd.ListSchedules(r.Context(), c.cred, nq)
	if err != nil {
		h.relay(w, r, route, err)
		return
	}
	h.ok(route)
	httpx.WriteJSON(w, http.StatusOK, page.Total)
}

// cronRoutes mounts the routes of crons without a thread under the /runs family.
func (h *Handler) cronRoutes(r chi.Router) {
	r.Post("/crons", h.createCron)
	r.Post("/crons/search", h.searchCrons)
	r.Post("/crons/count", h.countCrons)
	r.Patch("/crons/{cron_id}", h.updateCron)
	r.Delete("/crons/{cron_id}", h.deleteCron)
}
