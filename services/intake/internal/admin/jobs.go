package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/services/intake/internal/api"
)

// Job actions.
const (
	ActionCancel = "cancel"
	ActionReplay = "replay"
)

// Job states: running (or being resumed) until every item has an outcome, then succeeded;
// cancelling once asked to stop, then cancelled (its pending items are left pending).
const (
	JobRunning    = "running"
	JobCancelling = "cancelling"
	JobCancelled  = "cancelled"
	JobSucceeded  = "succeeded"
)

// JobsMaxItems bounds the turns one job may act on.
const JobsMaxItems = 1_000_000

var jobNameRE = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

// NewJob is the body of POST /v1/admin/jobs.
type NewJob struct {
	Name   string `json:"name"`
	Action string `json:"action"`
	Filter Filter `json:"filter"`
	// Replay changes a replay job's turns from their originals.
	Replay ReplayOptions `json:"replay,omitzero"`
}

// Job is a bulk job as the API shows it.
type Job struct {
	JobID      string          `json:"job_id"`
	Name       string          `json:"name"`
	Action     string          `json:"action"`
	Scope      string          `json:"scope,omitempty"`
	Filter     json.RawMessage `json:"filter"`
	State      string          `json:"state"`
	Total      int             `json:"total"`
	Done       int             `json:"done"`
	Failed     int             `json:"failed"`
	Pending    int             `json:"pending"`
	Runs       int             `json:"runs"`
	CreatedBy  string          `json:"created_by"`
	CreatedAt  time.Time       `json:"created_at"`
	UpdatedAt  time.Time       `json:"updated_at"`
	FinishedAt *time.Time      `json:"finished_at,omitempty"`
	Error      string          `json:"error,omitempty"`
}

const jobColumns = `job_id, name, action, coalesce(scope, ''), filter, state, total, done, failed, runs, created_by,
	created_at, updated_at, finished_at, coalesce(error, '')`

func (h *Handler) scanJob(row pgx.Row) (Job, error) {
	var j Job
	var id uuid.UUID
	err := row.Scan(&id, &j.Name, &j.Action, &j.Scope, &j.Filter, &j.State, &j.Total, &j.Done, &j.Failed, &j.Runs,
		&j.CreatedBy, &j.CreatedAt, &j.UpdatedAt, &j.FinishedAt, &j.Error)
	j.JobID = h.showID(id)
	j.Pending = j.Total - j.Done - j.Failed
	return j, err
}

// actionable narrows a job's filter to the turns its action can act on.
func actionable(action string) string {
	if action == ActionCancel {
		return " AND t.status IN ('queued', 'running')"
	}
	return " AND t.status NOT IN ('queued', 'running')"
}

func (h *Handler) createJob(w http.ResponseWriter, r *http.Request) {
	var nj NewJob
	if p := readJSON(w, r, &nj); p != nil {
		h.record(r, "job.create", "", nil, "refused", p.Detail)
		refuse(w, *p)
		return
	}
	err := nj.Filter.validate()
	switch {
	case err != nil:
	case !jobNameRE.MatchString(nj.Name):
		err = errors.New("name must be 1-128 characters of [A-Za-z0-9._:-]")
	case nj.Action != ActionCancel && nj.Action != ActionReplay:
		err = fmt.Errorf("action must be %q or %q", ActionCancel, ActionReplay)
	default:
		err = nj.Replay.validate(h.d.Submit)
	}
	if err != nil {
		h.record(r, "job.create", nj.Name, nj.Filter, "refused", err.Error())
		refuse(w, httpx.ProblemValidation.Problem(err.Error()))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*h.cfg.Timeout)
	defer cancel()
	h.d.Submit.FlushQueued(ctx)
	j, err := h.insertJob(ctx, nj, scope(r), principal(r))
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "23505":
		h.record(r, "job.create", nj.Name, nj.Filter, "refused", "the name is taken")
		refuse(w, httpx.ProblemJobExists.Problem("a job named "+nj.Name+" exists"))
		return
	case errors.Is(err, errTooMany):
		h.record(r, "job.create", nj.Name, nj.Filter, "refused", err.Error())
		refuse(w, httpx.ProblemValidation.Problem(err.Error()))
		return
	case err != nil:
		h.record(r, "job.create", nj.Name, nj.Filter, outcomeFailed, err.Error())
		h.storeFault(w, r, "the job", err)
		return
	}
	h.record(r, "job.create", j.JobID, nj.Filter, outcomeDone, fmt.Sprintf("%s %s of %d turns", nj.Action, nj.Name, j.Total))
	if h.d.Kick != nil {
		h.d.Kick()
	}
	w.Header().Set("Location", "/v1/admin/jobs/"+j.JobID)
	httpx.WriteJSON(w, http.StatusCreated, j)
}

var errTooMany = fmt.Errorf("the filter matches more than %d turns; narrow it", JobsMaxItems)

// insertJob stores a job and its items (the turns its filter matches within scope now) in one
// transaction.
func (h *Handler) insertJob(ctx context.Context, nj NewJob, scope string, by api.Principal) (Job, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return Job{}, err
	}
	if by.KeyID == "" {
		by.KeyID = "-"
	}
	tx, err := h.d.Pool.Begin(ctx)
	if err != nil {
		return Job{}, fmt.Errorf("create job: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var sc *string
	if scope != "" {
		sc = &scope
	}
	if _, err := tx.Exec(ctx, `INSERT INTO admin_jobs (job_id, name, action, scope, filter, options, state, created_by, creator_tenant)
		VALUES ($1, $2, $3, $4, $5, $6, 'running', $7, $8)`, id, nj.Name, nj.Action, sc, mustJSON(nj.Filter), mustJSON(nj.Replay),
		by.KeyID, by.Tenant); err != nil {
		return Job{}, err
	}
	args := []any{id}
	where := nj.Filter.where(scope, h.defaultAgent(), &args) + actionable(nj.Action)
	tag, err := tx.Exec(ctx, `INSERT INTO admin_job_items (job_id, turn_id) SELECT $1, t.turn_id FROM turns t WHERE `+where+
		fmt.Sprintf(" LIMIT %d", JobsMaxItems+1), args...)
	if err != nil {
		return Job{}, fmt.Errorf("create job items: %w", err)
	}
	if tag.RowsAffected() > JobsMaxItems {
		return Job{}, errTooMany
	}
	j, err := h.scanJob(tx.QueryRow(ctx, `UPDATE admin_jobs SET total = $2 WHERE job_id = $1 RETURNING `+jobColumns, id, tag.RowsAffected()))
	if err != nil {
		return Job{}, fmt.Errorf("create job: %w", err)
	}
	if tag.RowsAffected() == 0 {
		if j, err = h.scanJob(tx.QueryRow(ctx, `UPDATE admin_jobs SET state = 'succeeded', finished_at = now()
			WHERE job_id = $1 RETURNING `+jobColumns, id)); err != nil {
			return Job{}, fmt.Errorf("create job: %w", err)
		}
	}
	return j, tx.Commit(ctx)
}

// loadJob reads the path's job within the request's scope, or answers the refusal.
func (h *Handler) loadJob(w http.ResponseWriter, r *http.Request) (Job, uuid.UUID, bool) {
	id, ok := h.parseID(chi.URLParam(r, "job_id"))
	if !ok {
		refuse(w, httpx.ProblemNotFound.Problem("no such job"))
		return Job{}, id, false
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	j, err := h.scanJob(h.d.Pool.QueryRow(ctx, `SELECT `+jobColumns+` FROM admin_jobs WHERE job_id = $1 AND ($2 = '' OR scope = $2)`, id, scope(r)))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		refuse(w, httpx.ProblemNotFound.Problem("no such job"))
		return j, id, false
	case err != nil:
		h.storeFault(w, r, "the job", err)
		return j, id, false
	}
	return j, id, true
}

func (h *Handler) getJob(w http.ResponseWriter, r *http.Request) {
	if j, _, ok := h.loadJob(w, r); ok {
		httpx.WriteJSON(w, http.StatusOK, j)
	}
}

func (h *Handler) listJobs(w http.ResponseWriter, r *http.Request) {
	limit, p := pageLimit(r)
	if p != nil {
		refuse(w, *p)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	rows, err := h.d.Pool.Query(ctx, `SELECT `+jobColumns+` FROM admin_jobs WHERE ($1 = '' OR scope = $1)
		ORDER BY created_at DESC LIMIT $2`, scope(r), limit)
	if err != nil {
		h.storeFault(w, r, "the jobs", err)
		return
	}
	jobs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Job, error) { return h.scanJob(row) })
	if err != nil {
		h.storeFault(w, r, "the jobs", err)
		return
	}
	if jobs == nil {
		jobs = []Job{}
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"jobs": jobs})
}

// cancelJob asks a running job to stop: its runner stops at its next batch; a job no runner holds
// is cancelled at once.
func (h *Handler) cancelJob(w http.ResponseWriter, r *http.Request) {
	j, id, ok := h.loadJob(w, r)
	if !ok {
		h.record(r, "job.cancel", chi.URLParam(r, "job_id"), nil, "refused", "no such job")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	cj, err := h.scanJob(h.d.Pool.QueryRow(ctx, `UPDATE admin_jobs SET
			state = CASE WHEN lease_expires_at > now() THEN 'cancelling' ELSE 'cancelled' END,
			finished_at = CASE WHEN lease_expires_at > now() THEN NULL ELSE now() END, updated_at = now()
		WHERE job_id = $1 AND state = 'running' RETURNING `+jobColumns, id))
	if errors.Is(err, pgx.ErrNoRows) { // already ending or ended
		h.record(r, "job.cancel", j.JobID, nil, outcomeSkipped, "the job was "+j.State)
		h.getJob(w, r)
		return
	}
	if err != nil {
		h.record(r, "job.cancel", j.JobID, nil, outcomeFailed, err.Error())
		h.storeFault(w, r, "the job", err)
		return
	}
	h.record(r, "job.cancel", j.JobID, nil, outcomeDone, "")
	httpx.WriteJSON(w, http.StatusAccepted, cj)
}
