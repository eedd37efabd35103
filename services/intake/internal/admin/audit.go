package admin

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/turnstile-run/turnstile/pkg/httpx"
)

// Entry is one admin action of the audit log.
type Entry struct {
	ID      int64           `json:"id"`
	At      time.Time       `json:"at"`
	KeyID   string          `json:"key_id"`
	Tenant  string          `json:"tenant"`
	Action  string          `json:"action"`
	Target  string          `json:"target,omitempty"`
	Filter  json.RawMessage `json:"filter,omitempty"`
	Outcome string          `json:"outcome"`
	Detail  string          `json:"detail,omitempty"`
}

// record writes an action of the request's principal to the audit log. It does not fail the
// action it records (the action happened); a failed write is logged at error.
func (h *Handler) record(r *http.Request, action, target string, filter any, outcome, detail string) {
	h.writeAudit(context.WithoutCancel(r.Context()), keyID(r), principal(r).Tenant, action, target, filter, outcome, detail)
}

// keyID is the ID of the request's key as the audit log and the rows an action writes name it:
// "-" without one (TURNSTILE_AUTH=off).
func keyID(r *http.Request) string {
	if id := principal(r).KeyID; id != "" {
		return id
	}
	return "-"
}

func (h *Handler) writeAudit(ctx context.Context, keyID, tenant, action, target string, filter any, outcome, detail string) {
	writeAudit(ctx, h.d.Pool, h.d.Log, keyID, tenant, action, target, filter, outcome, detail)
}

func writeAudit(ctx context.Context, pool pgxExec, log interface {
	ErrorContext(context.Context, string, ...any)
}, keyID, tenant, action, target string, filter any, outcome, detail string,
) {
	var f []byte
	if filter != nil {
		f, _ = json.Marshal(filter)
	}
	ctx, cancel := context.WithTimeout(ctx, TimeoutDefault)
	defer cancel()
	if _, err := pool.Exec(ctx, `INSERT INTO admin_audit (key_id, tenant, action, target, filter, outcome, detail)
		VALUES ($1, $2, $3, nullif($4, ''), $5, $6, nullif($7, ''))`, keyID, tenant, action, target, f, outcome, detail); err != nil {
		log.ErrorContext(ctx, "admin: audit entry not written", "action", action, "target", target, "outcome", outcome, "err", err)
	}
}

// AuditPage is a page of the audit log, newest first.
type AuditPage struct {
	Entries    []Entry `json:"entries"`
	NextCursor string  `json:"next_cursor,omitempty"`
}

// audit serves GET /v1/admin/audit: an admin reads every entry, a tenant's key its tenant's.
func (h *Handler) audit(w http.ResponseWriter, r *http.Request) {
	limit, p := pageLimit(r)
	if p != nil {
		refuse(w, *p)
		return
	}
	before := int64(1<<63 - 1)
	if v := r.URL.Query().Get("cursor"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			refuse(w, httpx.ProblemInvalidCursor.Problem("cursor must be a next_cursor this API returned"))
			return
		}
		before = n
	}
	action := r.URL.Query().Get("action")
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	rows, err := h.d.Pool.Query(ctx, `SELECT audit_id, at, key_id, tenant, action, coalesce(target, ''), filter, outcome, coalesce(detail, '')
		FROM admin_audit WHERE audit_id < $1 AND ($2 = '' OR tenant = $2) AND ($3 = '' OR action = $3)
		ORDER BY audit_id DESC LIMIT $4`, before, scope(r), action, limit)
	if err != nil {
		h.storeFault(w, r, "the audit log", err)
		return
	}
	entries, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Entry, error) {
		var e Entry
		return e, row.Scan(&e.ID, &e.At, &e.KeyID, &e.Tenant, &e.Action, &e.Target, &e.Filter, &e.Outcome, &e.Detail)
	})
	if err != nil {
		h.storeFault(w, r, "the audit log", err)
		return
	}
	page := AuditPage{Entries: entries}
	if page.Entries == nil {
		page.Entries = []Entry{}
	}
	if len(entries) == limit {
		page.NextCursor = strconv.FormatInt(entries[len(entries)-1].ID, 10)
	}
	httpx.WriteJSON(w, http.StatusOK, page)
}
