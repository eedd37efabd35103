package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/turnstile-run/turnstile/pkg/apikey"
	"github.com/turnstile-run/turnstile/pkg/httpx"
)

// Pause is a paused queue: the turns of a tenant (Agent ""), of an agent (Tenant "") or of one
// tenant's turns of one agent. Workers do not start them until it is resumed.
type Pause struct {
	Tenant   string    `json:"tenant"`
	Agent    string    `json:"agent"`
	Reason   string    `json:"reason,omitempty"`
	PausedBy string    `json:"paused_by"`
	PausedAt time.Time `json:"paused_at"`
	// Queued counts the queued turns the pause holds now.
	Queued int `json:"queued"`
}

// PauseScope is the body of POST /v1/admin/pauses and /v1/admin/pauses/resume.
type PauseScope struct {
	Tenant string `json:"tenant,omitempty"`
	Agent  string `json:"agent,omitempty"`
	// Reason says why, for the operators who see the pause (pause only).
	Reason string `json:"reason,omitempty"`
}

// pauseColumns read a queue_pauses row q with the queued turns it holds. A row without an agent
// is the default agent's (migration 00200), as the claim and the backlog count it.
const pauseColumns = `q.tenant, q.agent, coalesce(q.reason, ''), q.paused_by, q.paused_at,
	(SELECT count(*) FROM turns t WHERE t.status = 'queued' AND NOT t.cancel_requested
		AND (q.tenant = '' OR t.tenant = q.tenant) AND (q.agent = '' OR coalesce(t.agent, $1) = q.agent))`

func scanPause(row pgx.Row) (Pause, error) {
	var p Pause
	return p, row.Scan(&p.Tenant, &p.Agent, &p.Reason, &p.PausedBy, &p.PausedAt, &p.Queued)
}

// pauseScope checks a request's scope: a tenant's key acts on its own tenant only (the tenant it
// names, if any, must be its own: another is not found), an admin's on any.
func (h *Handler) pauseScope(r *http.Request, ps *PauseScope) *httpx.Problem {
	if sc := scope(r); sc != "" {
		if ps.Tenant != "" && ps.Tenant != sc {
			p := httpx.ProblemNotFound.Problem("no such tenant")
			return &p
		}
		ps.Tenant = sc
	}
	var err error
	switch {
	case ps.Tenant == "" && ps.Agent == "":
		err = errors.New("name a tenant, an agent or both")
	case ps.Tenant != "" && !apikey.TenantValid(ps.Tenant):
		err = apikey.ErrInvalidTenant
	case len(ps.Reason) > 1000:
		err = errors.New("reason is longer than 1000 characters")
	case ps.Agent != "":
		name, ok := h.d.Submit.Agent(ps.Agent)
		if !ok {
			err = fmt.Errorf("agent %q is not in the catalog (GET /v1/agents)", ps.Agent)
		}
		ps.Agent = name
	}
	if err != nil {
		p := httpx.ProblemValidation.Problem(err.Error())
		return &p
	}
	return nil
}

// listPauses serves GET /v1/admin/pauses: every pause for an admin, its tenant's for a tenant's key.
func (h *Handler) listPauses(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	rows, err := h.d.Pool.Query(ctx, `SELECT `+pauseColumns+` FROM queue_pauses q
		WHERE ($2 = '' OR q.tenant = $2) ORDER BY q.paused_at, q.tenant, q.agent`, h.defaultAgent(), scope(r))
	if err != nil {
		h.storeFault(w, r, "the pauses", err)
		return
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Pause, error) { return scanPause(row) })
	if err != nil {
		h.storeFault(w, r, "the pauses", err)
		return
	}
	if out == nil {
		out = []Pause{}
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"pauses": out})
}

// pause serves POST /v1/admin/pauses: 201 with the new pause, 200 with the pause that was there.
// Workers stop starting the turns it covers at their next claim of each.
func (h *Handler) pause(w http.ResponseWriter, r *http.Request) {
	var ps PauseScope
	if p := readJSON(w, r, &ps); p != nil {
		h.record(r, "queue.pause", "", nil, "refused", p.Detail)
		refuse(w, *p)
		return
	}
	if p := h.pauseScope(r, &ps); p != nil {
		h.record(r, "queue.pause", pauseTarget(ps), nil, "refused", p.Detail)
		refuse(w, *p)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	by := keyID(r)
	var created bool
	err := h.d.Pool.QueryRow(ctx, `INSERT INTO queue_pauses (tenant, agent, reason, paused_by) VALUES ($1, $2, nullif($3, ''), $4)
		ON CONFLICT (tenant, agent) DO NOTHING RETURNING true`, ps.Tenant, ps.Agent, ps.Reason, by).Scan(&created)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		h.record(r, "queue.pause", pauseTarget(ps), nil, outcomeFailed, err.Error())
		h.storeFault(w, r, "the pause", err)
		return
	}
	p, err := scanPause(h.d.Pool.QueryRow(ctx, `SELECT `+pauseColumns+` FROM queue_pauses q WHERE q.tenant = $2 AND q.agent = $3`,
		h.defaultAgent(), ps.Tenant, ps.Agent))
	if err != nil {
		h.storeFault(w, r, "the pause", err)
		return
	}
	status, outcome := http.StatusCreated, outcomeDone
	if !created {
		status, outcome = http.StatusOK, outcomeSkipped
	}
	h.record(r, "queue.pause", pauseTarget(ps), nil, outcome, ps.Reason)
	h.d.Log.InfoContext(ctx, "admin: queue paused", "tenant", ps.Tenant, "agent", ps.Agent, "by", by, "new", created)
	httpx.WriteJSON(w, status, p)
}

// resume serves POST /v1/admin/pauses/resume: it removes the pause of exactly that scope (404 when
// there is none). Its held turns start at their next claim: within a few seconds (the consumer's
// longest deferral pause, consume.DeferPauseLongest).
func (h *Handler) resume(w http.ResponseWriter, r *http.Request) {
	var ps PauseScope
	if p := readJSON(w, r, &ps); p != nil {
		h.record(r, "queue.resume", "", nil, "refused", p.Detail)
		refuse(w, *p)
		return
	}
	if p := h.pauseScope(r, &ps); p != nil {
		h.record(r, "queue.resume", pauseTarget(ps), nil, "refused", p.Detail)
		refuse(w, *p)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	p, err := scanPause(h.d.Pool.QueryRow(ctx, `DELETE FROM queue_pauses q WHERE q.tenant = $2 AND q.agent = $3 RETURNING `+pauseColumns,
		h.defaultAgent(), ps.Tenant, ps.Agent))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		h.record(r, "queue.resume", pauseTarget(ps), nil, "refused", "no such pause")
		refuse(w, httpx.ProblemNotFound.Problem("no such pause"))
		return
	case err != nil:
		h.record(r, "queue.resume", pauseTarget(ps), nil, outcomeFailed, err.Error())
		h.storeFault(w, r, "the resume", err)
		return
	}
	h.record(r, "queue.resume", pauseTarget(ps), nil, outcomeDone, fmt.Sprintf("%d queued turns released", p.Queued))
	h.d.Log.InfoContext(ctx, "admin: queue resumed", "tenant", ps.Tenant, "agent", ps.Agent, "queued", p.Queued)
	httpx.WriteJSON(w, http.StatusOK, p)
}

// pauseTarget names a pause's scope in the audit log: tenant=acme, agent=chat or both.
func pauseTarget(ps PauseScope) string {
	switch {
	case ps.Tenant != "" && ps.Agent != "":
		return "tenant=" + ps.Tenant + ",agent=" + ps.Agent
	case ps.Tenant != "":
		return "tenant=" + ps.Tenant
	case ps.Agent != "":
		return "agent=" + ps.Agent
	}
	return ""
}
