package admin

import (
	"context"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/turnstile-run/turnstile/pkg/httpx"
)

// BacklogRow is the live turns of one agent and tenant: queued (waiting for a worker or for the
// turns ahead of them in their session), paused (queued under a queue pause: not backlog, more
// workers cannot start them) and running, with the oldest queued one's acceptance (paused ones
// left out).
type BacklogRow struct {
	Agent        string     `json:"agent"`
	Tenant       string     `json:"tenant"`
	Queued       int        `json:"queued"`
	Paused       int        `json:"paused"`
	Running      int        `json:"running"`
	OldestQueued *time.Time `json:"oldest_queued_at,omitempty"`
	// AgeSeconds is how long the oldest queued turn has waited, 0 with none queued.
	AgeSeconds float64 `json:"age_seconds"`
}

// backlog serves GET /v1/admin/backlog: live turns by agent and tenant, oldest backlog first
// (the caller's tenant only, for a tenant's key). It reads the live turns only, through the
// partial indexes on queued and running rows; queue_pauses is a handful of rows.
func (h *Handler) backlog(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	h.d.Submit.FlushQueued(ctx)
	rows, err := h.d.Pool.Query(ctx, `WITH live AS (
			SELECT coalesce(t.agent, $2) AS agent, t.tenant, t.status, t.accepted_at,
				t.status = 'queued' AND EXISTS (SELECT 1 FROM queue_pauses q WHERE (q.tenant = '' OR q.tenant = t.tenant)
					AND (q.agent = '' OR q.agent = coalesce(t.agent, $2))) AS paused
			FROM turns t WHERE t.status IN ('queued', 'running') AND ($1 = '' OR t.tenant = $1))
		SELECT agent, tenant, count(*) FILTER (WHERE status = 'queued' AND NOT paused), count(*) FILTER (WHERE paused),
			count(*) FILTER (WHERE status = 'running'), min(accepted_at) FILTER (WHERE status = 'queued' AND NOT paused), now()
		FROM live GROUP BY 1, 2 ORDER BY 6 NULLS LAST, 1, 2 LIMIT $3`, scope(r), h.defaultAgent(), PageSizeMax)
	if err != nil {
		h.storeFault(w, r, "the backlog", err)
		return
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (BacklogRow, error) {
		var b BacklogRow
		var now time.Time
		if err := row.Scan(&b.Agent, &b.Tenant, &b.Queued, &b.Paused, &b.Running, &b.OldestQueued, &now); err != nil {
			return b, err
		}
		if name, ok := h.d.Submit.Agent(b.Agent); ok {
			b.Agent = name
		}
		if b.OldestQueued != nil {
			b.AgeSeconds = max(0, now.Sub(*b.OldestQueued).Seconds())
		}
		return b, nil
	})
	if err != nil {
		h.storeFault(w, r, "the backlog", err)
		return
	}
	if out == nil {
		out = []BacklogRow{}
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"backlog": out})
}
