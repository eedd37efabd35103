package api

import (
	"context"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/turnstile-run/turnstile/pkg/httpx"
)

// notificationView is one push notification of a turn (README "Push notifications"): what the
// notifier did with it, and for a dead-lettered one its last error.
type notificationView struct {
	WebhookID   string     `json:"webhook_id"`
	Status      string     `json:"status"`
	State       string     `json:"state"` // pending, delivered or dead
	Attempts    int        `json:"attempts"`
	CreatedAt   time.Time  `json:"created_at"`
	DeliveredAt *time.Time `json:"delivered_at,omitempty"`
	DeadAt      *time.Time `json:"dead_at,omitempty"`
	LastError   string     `json:"last_error,omitempty"`
}

// maxNotificationsShown bounds the answer; a turn has one notification per status change.
const maxNotificationsShown = 100

// getNotifications answers GET /v1/turns/{turn_id}/notifications: the turn's push notifications,
// oldest first, so a client sees which were given up and why.
func (h *Handler) getNotifications(w http.ResponseWriter, r *http.Request) {
	const route = "get_notifications"
	t, ok := h.loadTurn(w, r, route)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.StatusTimeout)
	defer cancel()
	rows, err := h.d.Pool.Query(ctx, `SELECT 'msg_' || id, status, CASE WHEN delivered_at IS NOT NULL THEN 'delivered'
			WHEN dead_at IS NOT NULL THEN 'dead' ELSE 'pending' END, attempts, created_at, delivered_at, dead_at,
			coalesce(last_error, '')
		FROM turn_notifications WHERE turn_id = $1 ORDER BY id LIMIT $2`, t.TurnID, maxNotificationsShown)
	var out []notificationView
	if err == nil {
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (notificationView, error) {
			var n notificationView
			err := row.Scan(&n.WebhookID, &n.Status, &n.State, &n.Attempts, &n.CreatedAt, &n.DeliveredAt, &n.DeadAt, &n.LastError)
			return n, err
		})
	}
	if err != nil {
		h.d.Log.WarnContext(r.Context(), "read notifications failed", "turn_id", t.TurnID, "err", err)
		h.refuse(w, route, httpx.ProblemStoreUnavail.Problem("notifications are unavailable"))
		return
	}
	if out == nil {
		out = []notificationView{}
	}
	h.requests.WithLabelValues(route, "ok").Inc()
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"notifications": out})
}
