package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/turnstile-run/turnstile/pkg/frontdoor"
	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/pkg/region"
	"github.com/turnstile-run/turnstile/pkg/wire"
	"github.com/turnstile-run/turnstile/services/langgraph/internal/render"
	"github.com/turnstile-run/turnstile/services/langgraph/internal/threads"
)

// threadJSON is LangGraph's Thread.
type threadJSON struct {
	ThreadID   string          `json:"thread_id"`
	CreatedAt  time.Time       `json:"created_at"`
	UpdatedAt  time.Time       `json:"updated_at"`
	Metadata   json.RawMessage `json:"metadata"`
	Status     string          `json:"status"` // idle, busy, error, interrupted
	Values     any             `json:"values"`
	Interrupts map[string]any  `json:"interrupts"`
}

type createThreadBody struct {
	ThreadID   string          `json:"thread_id"`
	Metadata   json.RawMessage `json:"metadata"`
	IfExists   string          `json:"if_exists"` // raise (default) or do_nothing
	Supersteps json.RawMessage `json:"supersteps"`
	TTL        json.RawMessage `json:"ttl"`
}

func (h *Handler) createThread(w http.ResponseWriter, r *http.Request) {
	const route = "create_thread"
	c, p := h.authenticate(r)
	if p != nil {
		h.refuse(w, route, *p)
		return
	}
	var body createThreadBody
	if p := h.decodeBody(w, r, &body); p != nil {
		h.refuse(w, route, *p)
		return
	}
	switch {
	case body.ThreadID != "" && !wire.SessionIDValid(body.ThreadID):
		h.refuse(w, route, httpx.ProblemInvalidSession.Problem("thread_id must be "+wire.SessionIDRule+" (it is the session ID)"))
		return
	case body.IfExists != "" && body.IfExists != "raise" && body.IfExists != "do_nothing":
		h.refuse(w, route, httpx.ProblemValidation.Problem(`if_exists must be "raise" or "do_nothing"`))
		return
	case isSet(body.Supersteps):
		h.refuse(w, route, httpx.ProblemValidation.Problem("supersteps are not supported: a thread's state is the messages of its runs"))
		return
	case isSet(body.TTL):
		h.refuse(w, route, httpx.ProblemValidation.Problem("ttl is not supported: a thread idle for TURNSTILE_LANGGRAPH_THREAD_TTL is deleted"))
		return
	case isSet(body.Metadata) && !isObject(body.Metadata):
		h.refuse(w, route, httpx.ProblemValidation.Problem("metadata must be an object"))
		return
	case len(body.Metadata) > h.cfg.MetadataMax:
		h.refuse(w, route, httpx.ProblemValidation.Problem(fmt.Sprintf(
			"metadata is %d bytes, over the %d bytes a thread's metadata may have (TURNSTILE_LANGGRAPH_METADATA_MAX)", len(body.Metadata), h.cfg.MetadataMax)))
		return
	}
	if owner, ok := h.cfg.Region.Chosen(body.ThreadID); ok {
		h.refuse(w, route, region.Misdirected(owner))
		return
	}
	id := body.ThreadID
	if id == "" {
		id = region.NewID(h.cfg.Region.Code)
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.StoreTimeout)
	defer cancel()
	th, created, err := h.threads.Create(ctx, c.tenant, id, body.Metadata, h.cfg.ThreadsMax)
	if errors.Is(err, threads.ErrLimit) {
		h.refuse(w, route, h.threadsLimit())
		return
	}
	if err != nil {
		h.log.WarnContext(r.Context(), "create thread failed", "session_id", id, "err", err)
		h.refuse(w, route, h.storeDown("the thread cannot be stored now"))
		return
	}
	if !created && body.IfExists != "do_nothing" {
		h.refuse(w, route, httpx.ProblemThreadExists.Problem("thread "+id+" exists (send if_exists=do_nothing to get it)"))
		return
	}
	h.ok(route)
	httpx.WriteJSON(w, http.StatusOK, threadJSON{
		ThreadID: th.ID, CreatedAt: th.CreatedAt, UpdatedAt: th.UpdatedAt, Metadata: th.Metadata,
		Status: "idle", Values: map[string]any{}, Interrupts: map[string]any{},
	})
}

// threadsLimit is the refusal of a new thread for a tenant that has its most.
func (h *Handler) threadsLimit() httpx.Problem {
	return httpx.ProblemThreadsLimit.Problem(fmt.Sprintf(
		"the tenant has %d threads, the most it may have (TURNSTILE_LANGGRAPH_THREADS_MAX): delete one first", h.cfg.ThreadsMax))
}

// deleteThread answers DELETE /threads/{thread_id} (the SDK's threads.delete): 204 once the thread
// is gone, 404 when the tenant has none of that ID, 409 thread-busy while a run of it is queued
// or running. Its runs (the session's turns) stay until retention; see threads.Store.Delete.
func (h *Handler) deleteThread(w http.ResponseWriter, r *http.Request) {
	const route = "delete_thread"
	c, p := h.authenticate(r)
	if p != nil {
		h.refuse(w, route, *p)
		return
	}
	id := chi.URLParam(r, "thread_id")
	if !wire.SessionIDValid(id) {
		h.refuse(w, route, httpx.ProblemThreadNotFound.Problem("no thread "+id))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.StoreTimeout)
	defer cancel()
	switch err := h.threads.Delete(ctx, c.tenant, id, wire.NewSessionKey(c.tenant, id)); {
	case errors.Is(err, threads.ErrNotFound):
		h.refuse(w, route, httpx.ProblemThreadNotFound.Problem("no thread "+id))
		return
	case errors.Is(err, threads.ErrBusy):
		h.refuse(w, route, httpx.ProblemThreadBusy.Problem("thread "+id+" has a run queued or running: cancel it (or wait for it) first"))
		return
	case err != nil:
		h.log.WarnContext(r.Context(), "delete thread failed", "session_id", id, "err", err)
		h.refuse(w, route, h.storeDown("the thread cannot be deleted now"))
		return
	}
	h.log.InfoContext(r.Context(), "thread deleted", "session_id", id, "tenant", c.tenant)
	h.ok(route)
	w.WriteHeader(http.StatusNoContent)
}

func (h *Handler) getThread(w http.ResponseWriter, r *http.Request) {
	const route = "get_thread"
	c, th, ok := h.thread(w, r, route)
	if !ok {
		return
	}
	out, err := h.viewThread(r.Context(), c, th)
	if err != nil {
		h.relay(w, r, route, err)
		return
	}
	h.ok(route)
	httpx.WriteJSON(w, http.StatusOK, out)
}

// threadStatus is LangGraph's thread status of a thread whose turns are given oldest first.
func threadStatus(turns []frontdoor.Turn) string {
	if len(turns) == 0 {
		return "idle"
	}
	switch last := turns[len(turns)-1]; {
	case !last.Status.Terminal():
		return "busy"
	case last.Status == wire.StatusFailed || last.Status == wire.StatusExpired:
		return "error"
	}
	return "idle"
}

// stateJSON is LangGraph's ThreadState: a checkpoint after each finished run.
type stateJSON struct {
	Values           any             `json:"values"`
	Next             []string        `json:"next"`
	Tasks            []any           `json:"tasks"`
	Checkpoint       *checkpointJSON `json:"checkpoint"`
	ParentCheckpoint *checkpointJSON `json:"parent_checkpoint"`
	Metadata         map[string]any  `json:"metadata"`
	CreatedAt        *time.Time      `json:"created_at"`
}

type checkpointJSON struct {
	ThreadID      string `json:"thread_id"`
	CheckpointNS  string `json:"checkpoint_ns"`
	CheckpointID  string `json:"checkpoint_id"`
	CheckpointMap any    `json:"checkpoint_map"`
}

// view is a thread's state: the state set through the API (base, under its checkpoint; none when
// its runs alone make it) and the runs after it, oldest first, rolled-back ones left out.
type view struct {
	base   []render.Message
	baseCP string
	baseAt time.Time
	turns  []frontdoor.Turn
}

// messages are the thread's messages: the base's, then its runs'.
func (v view) messages() []render.Message {
	return append(append([]render.Message{}, v.base...), render.ThreadMessages(renderTurns(v.turns))...)
}

// states lists the thread's checkpoints newest first: the base (when set), then
// one after each finished run with the messages up to it. A thread with neither has none.
func (v view) states(threadID string) []stateJSON {
	rts := renderTurns(v.turns)
	var out []stateJSON
	var parent *checkpointJSON
	step := 0
	if v.baseCP != "" {
		cp := &checkpointJSON{ThreadID: threadID, CheckpointID: v.baseCP}
		at := v.baseAt
		out = append(out, stateJSON{
			Values: map[string]any{"messages": v.base}, Next: []string{}, Tasks: []any{}, Checkpoint: cp,
			Metadata: map[string]any{"source": "update", "step": 0, "thread_id": threadID}, CreatedAt: &at,
		})
		parent = cp
	}
	for i, t := range v.turns {
		if !t.Status.Terminal() {
			break
		}
		step++
		cp := &checkpointJSON{ThreadID: threadID, CheckpointID: rts[i].ID}
		at := t.AcceptedAt
		if t.FinishedAt != nil {
			at = *t.FinishedAt
		}
		msgs := append(append([]render.Message{}, v.base...), render.ThreadMessages(rts[:i+1])...)
		out = append(out, stateJSON{
			Values: map[string]any{"messages": msgs},
			Next:   []string{}, Tasks: []any{}, Checkpoint: cp, ParentCheckpoint: parent,
			Metadata:  map[string]any{"source": "loop", "step": step, "run_id": rts[i].ID, "thread_id": threadID},
			CreatedAt: &at,
		})
		parent = cp
	}
	slices.Reverse(out)
	return out
}

// head is the checkpoint ID of the thread's latest state, "" when it has none.
func (v view) head(threadID string) string {
	if st := v.states(threadID); len(st) > 0 {
		return st[0].Checkpoint.CheckpointID
	}
	return ""
}

// states lists the checkpoints of a thread whose runs alone make its state (view.states).
func states(threadID string, turns []frontdoor.Turn) []stateJSON {
	return view{turns: turns}.states(threadID)
}

// threadView reads the thread's state: its row (for a state set through the API) and its runs.
func (h *Handler) threadView(ctx context.Context, c caller, threadID string) (view, error) {
	sctx, cancel := context.WithTimeout(ctx, h.cfg.StoreTimeout)
	th, err := h.threads.Get(sctx, c.tenant, threadID)
	cancel()
	if err != nil && !errors.Is(err, threads.ErrNotFound) {
		return view{}, err
	}
	return h.viewOf(ctx, c, th, threadID)
}

// viewOf reads the state of th (the zero Thread for one without a row: its runs alone).
func (h *Handler) viewOf(ctx context.Context, c caller, th threads.Thread, threadID string) (view, error) {
	all, deleted, err := h.sessionTurns(ctx, c, threadID)
	if err != nil {
		return view{}, err
	}
	v := view{}
	if th.StateCheckpoint != "" {
		v.baseCP = th.StateCheckpoint
		if th.StateAt != nil {
			v.baseAt = *th.StateAt
		}
		_ = json.Unmarshal(th.State, &v.base)
		if i := slices.IndexFunc(all, func(t frontdoor.Turn) bool { return t.TurnID == th.StateAfterRun }); i >= 0 {
			all = all[i+1:]
		} else if th.StateAfterRun != "" {
			// That run is gone (retention): the runs accepted after the state was set follow it.
			all = slices.DeleteFunc(all, func(t frontdoor.Turn) bool { return !t.AcceptedAt.After(v.baseAt) })
		}
	}
	v.turns = slices.DeleteFunc(all, func(t frontdoor.Turn) bool { return deleted[t.TurnID] })
	return v, nil
}

func (h *Handler) getState(w http.ResponseWriter, r *http.Request) {
	const route = "get_state"
	c, th, ok := h.thread(w, r, route)
	if !ok {
		return
	}
	v, err := h.viewOf(r.Context(), c, th, th.ID)
	if err != nil {
		h.relay(w, r, route, err)
		return
	}
	h.ok(route)
	if st := v.states(th.ID); len(st) > 0 {
		httpx.WriteJSON(w, http.StatusOK, st[0])
		return
	}
	httpx.WriteJSON(w, http.StatusOK, stateJSON{
		Values: map[string]any{}, Next: []string{}, Tasks: []any{}, Metadata: map[string]any{},
	})
}

type historyBody struct {
	Limit  int `json:"limit"`
	Before *struct {
		CheckpointID string `json:"checkpoint_id"`
	} `json:"before"`
}

func (h *Handler) getHistory(w http.ResponseWriter, r *http.Request) {
	const route = "get_history"
	c, th, ok := h.thread(w, r, route)
	if !ok {
		return
	}
	body := historyBody{Limit: 10}
	if p := h.decodeBody(w, r, &body); p != nil {
		h.refuse(w, route, *p)
		return
	}
	if body.Limit < 1 || body.Limit > historyTurns {
		h.refuse(w, route, httpx.ProblemValidation.Problem("limit must be between 1 and 1000"))
		return
	}
	v, err := h.viewOf(r.Context(), c, th, th.ID)
	if err != nil {
		h.relay(w, r, route, err)
		return
	}
	st := v.states(th.ID)
	if body.Before != nil && body.Before.CheckpointID != "" {
		i := slices.IndexFunc(st, func(s stateJSON) bool { return s.Checkpoint.CheckpointID == body.Before.CheckpointID })
		if i < 0 {
			st = nil
		} else {
			st = st[i+1:]
		}
	}
	if len(st) > body.Limit {
		st = st[:body.Limit]
	}
	if st == nil {
		st = []stateJSON{}
	}
	h.ok(route)
	httpx.WriteJSON(w, http.StatusOK, st)
}

// thread authenticates the request and loads its path's thread, answering the refusal itself when
// it cannot.
func (h *Handler) thread(w http.ResponseWriter, r *http.Request, route string) (caller, threads.Thread, bool) {
	c, p := h.authenticate(r)
	if p != nil {
		h.refuse(w, route, *p)
		return caller{}, threads.Thread{}, false
	}
	th, p := h.loadThread(r, c, chi.URLParam(r, "thread_id"))
	if p != nil {
		h.refuse(w, route, *p)
		return caller{}, threads.Thread{}, false
	}
	return c, th, true
}

func (h *Handler) loadThread(r *http.Request, c caller, id string) (threads.Thread, *httpx.Problem) {
	if !wire.SessionIDValid(id) {
		p := httpx.ProblemThreadNotFound.Problem("no thread " + id)
		return threads.Thread{}, &p
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.StoreTimeout)
	defer cancel()
	th, err := h.threads.Get(ctx, c.tenant, id)
	switch {
	case errors.Is(err, threads.ErrNotFound):
		p := httpx.ProblemThreadNotFound.Problem("no thread " + id + " (create it with POST /threads, or run with if_not_exists=create)")
		return threads.Thread{}, &p
	case err != nil:
		h.log.WarnContext(r.Context(), "read thread failed", "session_id", id, "err", err)
		p := h.storeDown("the thread cannot be read now")
		return threads.Thread{}, &p
	}
	return th, nil
}

// sessionTurns reads the session's turns through the native API, oldest first, at most
// historyTurns of the newest, and the thread's deleted runs, each with whether it was rolled back
// (cancelled with action=rollback: no part of the thread's state).
func (h *Handler) sessionTurns(ctx context.Context, c caller, sessionID string) ([]frontdoor.Turn, map[string]bool, error) {
	sctx, cancel := context.WithTimeout(ctx, h.cfg.StoreTimeout)
	deleted, err := h.threads.DeletedRuns(sctx, c.tenant, sessionID)
	cancel()
	if err != nil {
		return nil, nil, err
	}
	var out []frontdoor.Turn
	cursor := ""
	for len(out) < historyTurns {
		page, err := h.fd.ListTurns(ctx, c.cred, sessionID, turnPage, cursor)
		if err != nil {
			var p *frontdoor.Problem
			if errors.As(err, &p) && p.Status == http.StatusNotFound {
				break // a session without turns yet
			}
			return nil, nil, err
		}
		out = append(out, page.Turns...)
		if page.NextCursor == "" || len(page.Turns) == 0 {
			break
		}
		cursor = page.NextCursor
	}
	slices.Reverse(out)
	return out, deleted, nil
}

// renderTurns maps turns to what rendering needs of them.
func renderTurns(turns []frontdoor.Turn) []render.Turn {
	out := make([]render.Turn, len(turns))
	for i, t := range turns {
		out[i] = renderTurn(t)
	}
	return out
}

func renderTurn(t frontdoor.Turn) render.Turn {
	return render.Turn{
		ID: t.TurnID, Status: t.Status, Attempt: t.Attempt,
		Input: textOf(t.Input), Output: textOf(t.Output),
	}
}

// textOf reads the text member of a turn's input or output.
func textOf(raw json.RawMessage) string {
	var v struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &v)
	return v.Text
}

func isSet(raw json.RawMessage) bool {
	s := string(raw)
	return len(raw) > 0 && s != "null"
}

func isObject(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(raw, &m) == nil && m != nil
}
