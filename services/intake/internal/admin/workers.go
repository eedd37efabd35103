package admin

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5"

	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/httpx"
)

// workersShown is how long a worker that stopped writing its presence row is still listed (as
// not alive).
const workersShown = 10 * time.Minute

// Worker is a worker process as its presence row (migration 00271) and the leases it holds say.
type Worker struct {
	Identity       string   `json:"identity"`
	Version        string   `json:"version"`
	Agents         []string `json:"agents"`
	InFlight       int      `json:"in_flight"`
	Draining       bool     `json:"draining"`
	DrainRequested bool     `json:"drain_requested"`
	// Alive says its row is younger than three of its presence intervals
	// (TURNSTILE_WORKER_PRESENCE_INTERVAL), taken as the interval of this process's configuration.
	Alive     bool       `json:"alive"`
	StartedAt *time.Time `json:"started_at,omitempty"`
	LastSeen  *time.Time `json:"last_seen,omitempty"`
	// LeaseTo is the latest expiry of the live leases it holds (of the caller's tenant's turns,
	// for a tenant's key), when it holds any.
	LeaseTo *time.Time `json:"lease_expires_at,omitempty"`
}

// workerSelect lists the workers: those with a presence row seen in the last workersShown, and
// those holding live leases without one (a worker of an older build). For a tenant's key ($1), only
// the workers holding its turns, with its turns as their in-flight count.
const workerSelect = `WITH leases AS (
	SELECT lease_owner AS identity, count(*) AS n, max(lease_expires_at) AS lease_to FROM turns
	WHERE status = 'running' AND lease_expires_at > now() AND ($1 = '' OR tenant = $1)
	GROUP BY lease_owner
)
SELECT coalesce(w.identity, l.identity), coalesce(w.version, ''), coalesce(w.agents, '{}'),
	CASE WHEN $1 = '' AND w.identity IS NOT NULL THEN w.in_flight ELSE coalesce(l.n, 0) END,
	coalesce(w.draining, false), coalesce(w.drain_requested, false),
	coalesce(w.last_seen > now() - $2 * interval '1 millisecond', l.identity IS NOT NULL),
	w.started_at, w.last_seen, l.lease_to
FROM (SELECT * FROM worker_heartbeats WHERE last_seen > now() - $3 * interval '1 millisecond') w
FULL JOIN leases l ON l.identity = w.identity
WHERE $1 = '' OR l.identity IS NOT NULL`

func scanWorker(row pgx.Row) (Worker, error) {
	var wk Worker
	return wk, row.Scan(&wk.Identity, &wk.Version, &wk.Agents, &wk.InFlight, &wk.Draining, &wk.DrainRequested,
		&wk.Alive, &wk.StartedAt, &wk.LastSeen, &wk.LeaseTo)
}

func (h *Handler) aliveWithin() time.Duration {
	return 3 * h.cfg.PresenceInterval
}

// workers serves GET /v1/admin/workers.
func (h *Handler) workers(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	rows, err := h.d.Pool.Query(ctx, workerSelect+` ORDER BY 1`, scope(r), h.aliveWithin().Milliseconds(), workersShown.Milliseconds())
	if err != nil {
		h.storeFault(w, r, "the workers", err)
		return
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Worker, error) { return scanWorker(row) })
	if err != nil {
		h.storeFault(w, r, "the workers", err)
		return
	}
	if out == nil {
		out = []Worker{}
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"workers": out})
}

// adminOnly refuses a tenant's key: the route acts on, or shows, the whole installation.
func (h *Handler) adminOnly(w http.ResponseWriter, r *http.Request, action, target string) bool {
	if principal(r).Admin {
		return true
	}
	if action != "" {
		h.record(r, action, target, nil, "refused", "admin key required")
	}
	refuse(w, httpx.ProblemAdminRequired.Problem("this route needs an admin key (apikey create --admin)"))
	return false
}

// drainWorker serves POST /v1/admin/workers/{identity}/drain: the worker reads the request at its
// next presence write (package presence in the worker) and drains.
func (h *Handler) drainWorker(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "identity")
	if !h.adminOnly(w, r, "worker.drain", id) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	by := keyID(r)
	var was bool
	err := h.d.Pool.QueryRow(ctx, `UPDATE worker_heartbeats n SET drain_requested = true, drain_by = coalesce(o.drain_by, $2)
		FROM worker_heartbeats o WHERE n.identity = $1 AND o.identity = n.identity RETURNING o.drain_requested`, id, by).Scan(&was)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		h.record(r, "worker.drain", id, nil, "refused", "no such worker")
		refuse(w, httpx.ProblemNotFound.Problem("no such worker (GET /v1/admin/workers)"))
		return
	case err != nil:
		h.record(r, "worker.drain", id, nil, outcomeFailed, err.Error())
		h.storeFault(w, r, "the drain", err)
		return
	}
	wk, err := scanWorker(h.d.Pool.QueryRow(ctx, workerSelect+` AND coalesce(w.identity, l.identity) = $4`,
		"", h.aliveWithin().Milliseconds(), workersShown.Milliseconds(), id))
	if err != nil {
		h.storeFault(w, r, "the worker", err)
		return
	}
	outcome := outcomeDone
	if was {
		outcome = outcomeSkipped
	}
	h.record(r, "worker.drain", id, nil, outcome, "")
	h.d.Log.InfoContext(ctx, "admin: worker drain requested", "identity", id, "by", by)
	httpx.WriteJSON(w, http.StatusAccepted, wk)
}

// configView serves GET /v1/admin/config: the configuration this process runs with, secrets
// redacted (config.View, the `config` command's view).
func (h *Handler) configView(w http.ResponseWriter, r *http.Request) {
	if !h.adminOnly(w, r, "", "") {
		return
	}
	settings := []config.Setting{}
	if h.d.Settings != nil {
		settings = h.d.Settings()
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"settings": settings})
}
