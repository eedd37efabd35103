package admin

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/turnstile-run/turnstile/pkg/apikey"
	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

// pgxExec is the part of a pool or transaction that runs a statement.
type pgxExec interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Filter selects turns, for a search and for a bulk job (which stores it). Zero fields select all.
type Filter struct {
	// Status is a set of statuses (queued, running, succeeded, failed, cancelled, expired).
	Status []string `json:"status,omitempty"`
	Tenant string   `json:"tenant,omitempty"`
	Agent  string   `json:"agent,omitempty"`
	// SessionID is the client's session ID (of Tenant, or of any tenant for an admin).
	SessionID string `json:"session_id,omitempty"`
	// Metadata selects turns whose metadata contains this object (jsonb @>).
	Metadata map[string]any `json:"metadata,omitempty"`
	// AcceptedAfter and AcceptedBefore bound accepted_at: [after, before).
	AcceptedAfter  *time.Time `json:"accepted_after,omitempty"`
	AcceptedBefore *time.Time `json:"accepted_before,omitempty"`
	// Error selects turns whose error contains this text (case-insensitive).
	Error string `json:"error,omitempty"`
	// DeadLettered selects dead-lettered turns only.
	DeadLettered bool `json:"dead_lettered,omitempty"`
}

var statuses = []string{"queued", "running", "succeeded", "failed", "cancelled", "expired"}

// validate checks the filter's fields.
func (f *Filter) validate() error {
	for _, s := range f.Status {
		if !slices.Contains(statuses, s) {
			return fmt.Errorf("status %q is not one of %s", s, strings.Join(statuses, ", "))
		}
	}
	if f.Tenant != "" && !apikey.TenantValid(f.Tenant) {
		return apikey.ErrInvalidTenant
	}
	if f.SessionID != "" && !wire.SessionIDValid(f.SessionID) {
		return fmt.Errorf("session_id %q is not a session ID", f.SessionID)
	}
	if len(f.Error) > 1000 {
		return fmt.Errorf("error filter is longer than 1000 characters")
	}
	return nil
}

// filterFromQuery reads a filter from a search's query string.
func filterFromQuery(r *http.Request) (Filter, error) {
	q := r.URL.Query()
	var f Filter
	if v := q.Get("status"); v != "" {
		f.Status = strings.Split(v, ",")
	}
	f.Tenant, f.Agent, f.SessionID, f.Error = q.Get("tenant"), q.Get("agent"), q.Get("session_id"), q.Get("error")
	if v := q.Get("metadata"); v != "" {
		if err := json.Unmarshal([]byte(v), &f.Metadata); err != nil {
			return f, fmt.Errorf("metadata must be a JSON object: %w", err)
		}
	}
	for name, p := range map[string]**time.Time{"accepted_after": &f.AcceptedAfter, "accepted_before": &f.AcceptedBefore} {
		if v := q.Get(name); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return f, fmt.Errorf("%s must be an RFC 3339 time", name)
			}
			*p = &t
		}
	}
	if v := q.Get("dead_lettered"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return f, fmt.Errorf("dead_lettered must be true or false")
		}
		f.DeadLettered = b
	}
	return f, f.validate()
}

// where renders the filter, within scope (a tenant, or "" for every tenant), as SQL conditions
// on turns t, appending their arguments to args.
func (f *Filter) where(scope, defaultAgent string, args *[]any) string {
	arg := func(v any) string {
		*args = append(*args, v)
		return "$" + strconv.Itoa(len(*args))
	}
	conds := []string{"true"}
	if scope != "" {
		conds = append(conds, "t.tenant = "+arg(scope))
	}
	if f.Tenant != "" {
		conds = append(conds, "t.tenant = "+arg(f.Tenant))
	}
	if f.Agent != "" {
		// A row without an agent is the default agent's (migration 00200).
		conds = append(conds, "coalesce(t.agent, "+arg(defaultAgent)+") = "+arg(f.Agent))
	}
	if f.SessionID != "" {
		switch tenant := cmpOr(f.Tenant, scope); tenant {
		case "":
			conds = append(conds, "turnstile_session_id(t.session_id) = "+arg(f.SessionID))
		default:
			conds = append(conds, "t.session_id = "+arg(wire.NewSessionKey(tenant, f.SessionID).String()))
		}
	}
	if len(f.Status) > 0 {
		conds = append(conds, "t.status = ANY("+arg(f.Status)+"::text[])")
		if len(f.Status) == 1 && f.Status[0] == "failed" {
			conds = append(conds, "t.status = 'failed'") // lets the planner use the partial index
		}
	}
	if len(f.Metadata) > 0 {
		b, _ := json.Marshal(f.Metadata)
		conds = append(conds, "t.metadata @> "+arg(string(b))+"::jsonb")
	}
	if f.AcceptedAfter != nil {
		conds = append(conds, "t.accepted_at >= "+arg(*f.AcceptedAfter))
	}
	if f.AcceptedBefore != nil {
		conds = append(conds, "t.accepted_at < "+arg(*f.AcceptedBefore))
	}
	if f.Error != "" {
		conds = append(conds, "strpos(lower(t.error), lower("+arg(f.Error)+")) > 0")
	}
	if f.DeadLettered {
		conds = append(conds, "t.dead_lettered IS NOT NULL")
	}
	return strings.Join(conds, " AND ")
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// TurnView is a turn as the admin API shows it. TurnID is the stored ID (unique across tenants);
// ClientTurnID the one the client minted, when it did.
type TurnView struct {
	TurnID          string          `json:"turn_id"`
	ClientTurnID    string          `json:"client_turn_id,omitempty"`
	Tenant          string          `json:"tenant"`
	SessionID       string          `json:"session_id"`
	Agent           string          `json:"agent"`
	Status          string          `json:"status"`
	Attempts        int             `json:"attempts"`
	Handoffs        int             `json:"handoffs"`
	Input           json.RawMessage `json:"input,omitempty"`
	Metadata        json.RawMessage `json:"metadata,omitempty"`
	Output          json.RawMessage `json:"output,omitempty"`
	Error           string          `json:"error,omitempty"`
	DeadLettered    string          `json:"dead_lettered,omitempty"`
	CancelRequested bool            `json:"cancel_requested"`
	AcceptedAt      time.Time       `json:"accepted_at"`
	Deadline        *time.Time      `json:"deadline,omitempty"`
	StartedAt       *time.Time      `json:"started_at,omitempty"`
	FinishedAt      *time.Time      `json:"finished_at,omitempty"`
	ReplayOf        string          `json:"replay_of,omitempty"`

	id uuid.UUID
}

const viewColumns = `t.turn_id, t.client_turn_id, t.tenant, t.session_id, t.status, t.attempt, t.handoffs, t.input,
	t.metadata, t.output, coalesce(t.error, ''), coalesce(t.dead_lettered, ''), t.cancel_requested, t.accepted_at,
	t.deadline, t.started_at, t.finished_at, coalesce(t.agent, ''),
	(SELECT rp.original_turn_id FROM turn_replays rp WHERE rp.turn_id = t.turn_id)`

func (h *Handler) scanView(row pgx.Row) (TurnView, error) {
	var v TurnView
	var client, replayOf *uuid.UUID
	var session string
	err := row.Scan(&v.id, &client, &v.Tenant, &session, &v.Status, &v.Attempts, &v.Handoffs, &v.Input, &v.Metadata,
		&v.Output, &v.Error, &v.DeadLettered, &v.CancelRequested, &v.AcceptedAt, &v.Deadline, &v.StartedAt, &v.FinishedAt, &v.Agent, &replayOf)
	if err != nil {
		return v, err
	}
	v.TurnID = h.showID(v.id)
	if name, ok := h.d.Submit.Agent(v.Agent); ok {
		v.Agent = name
	}
	if client != nil {
		v.ClientTurnID = h.showID(*client)
	}
	if replayOf != nil {
		v.ReplayOf = h.showID(*replayOf)
	}
	if k, err := wire.ParseSessionKey(session); err == nil {
		v.SessionID = k.SessionID()
	} else {
		v.SessionID = session
	}
	return v, nil
}

// TurnPage is a page of a search, newest first. Counts (by status, of every turn the filter
// matches) is there when ?counts=true asked for it.
type TurnPage struct {
	Turns      []TurnView     `json:"turns"`
	NextCursor string         `json:"next_cursor,omitempty"`
	Counts     map[string]int `json:"counts,omitempty"`
}

// cursor is the last row of a page: the next starts strictly after it.
type cursor struct {
	At time.Time `json:"a"`
	ID uuid.UUID `json:"i"`
}

func encodeCursor(v TurnView) string {
	b, _ := json.Marshal(cursor{At: v.AcceptedAt, ID: v.id})
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string) (cursor, bool) {
	var c cursor
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || json.Unmarshal(b, &c) != nil || c.ID == uuid.Nil {
		return cursor{}, false
	}
	return c, true
}

func pageLimit(r *http.Request) (int, *httpx.Problem) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return PageSizeDefault, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > PageSizeMax {
		p := httpx.ProblemValidation.Problem(fmt.Sprintf("limit must be an integer from 1 to %d", PageSizeMax))
		return 0, &p
	}
	return n, nil
}

// Search returns a page of the turns f matches within scope, after c (nil: the first page).
func (h *Handler) Search(ctx context.Context, f Filter, scope string, c *cursor, limit int) ([]TurnView, error) {
	var args []any
	where := f.where(scope, h.defaultAgent(), &args)
	if c != nil {
		args = append(args, c.At, c.ID)
		where += fmt.Sprintf(" AND (t.accepted_at, t.turn_id) < ($%d, $%d)", len(args)-1, len(args))
	}
	args = append(args, limit)
	rows, err := h.d.Pool.Query(ctx, `SELECT `+viewColumns+` FROM turns t WHERE `+where+
		` ORDER BY t.accepted_at DESC, t.turn_id DESC LIMIT $`+strconv.Itoa(len(args)), args...)
	if err != nil {
		return nil, fmt.Errorf("search turns: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (TurnView, error) { return h.scanView(row) })
	if err != nil {
		return nil, fmt.Errorf("search turns: %w", err)
	}
	return out, nil
}

// counts counts the turns f matches within scope, by status.
func (h *Handler) counts(ctx context.Context, f Filter, scope string) (map[string]int, error) {
	var args []any
	rows, err := h.d.Pool.Query(ctx, `SELECT t.status, count(*) FROM turns t WHERE `+f.where(scope, h.defaultAgent(), &args)+` GROUP BY t.status`, args...)
	if err != nil {
		return nil, fmt.Errorf("count turns: %w", err)
	}
	out := map[string]int{}
	var status string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&status, &n}, func() error {
		out[status] = n
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("count turns: %w", err)
	}
	return out, nil
}

func (h *Handler) searchTurns(w http.ResponseWriter, r *http.Request) {
	f, err := filterFromQuery(r)
	if err != nil {
		refuse(w, httpx.ProblemValidation.Problem(err.Error()))
		return
	}
	h.servePage(w, r, f)
}

// deadLetters serves GET /v1/admin/dead-letters: the search, dead letters only.
func (h *Handler) deadLetters(w http.ResponseWriter, r *http.Request) {
	f, err := filterFromQuery(r)
	if err != nil {
		refuse(w, httpx.ProblemValidation.Problem(err.Error()))
		return
	}
	f.DeadLettered = true
	h.servePage(w, r, f)
}

func (h *Handler) servePage(w http.ResponseWriter, r *http.Request, f Filter) {
	limit, p := pageLimit(r)
	if p != nil {
		refuse(w, *p)
		return
	}
	var c *cursor
	if v := r.URL.Query().Get("cursor"); v != "" {
		cc, ok := decodeCursor(v)
		if !ok {
			refuse(w, httpx.ProblemInvalidCursor.Problem("cursor must be a next_cursor this API returned"))
			return
		}
		c = &cc
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	if c == nil {
		h.d.Submit.FlushQueued(ctx) // a turn accepted here a moment ago is found
	}
	turns, err := h.Search(ctx, f, scope(r), c, limit)
	if err != nil {
		h.storeFault(w, r, "the search", err)
		return
	}
	page := TurnPage{Turns: turns}
	if page.Turns == nil {
		page.Turns = []TurnView{}
	}
	if len(turns) == limit {
		page.NextCursor = encodeCursor(turns[len(turns)-1])
	}
	if r.URL.Query().Get("counts") == "true" {
		if page.Counts, err = h.counts(ctx, f, scope(r)); err != nil {
			h.storeFault(w, r, "the counts", err)
			return
		}
	}
	httpx.WriteJSON(w, http.StatusOK, page)
}

// defaultAgent is the catalog's default agent, which rows naming no agent belong to.
func (h *Handler) defaultAgent() string {
	name, _ := h.d.Submit.Agent("")
	return name
}
