package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/pkg/streams"
	"github.com/turnstile-run/turnstile/pkg/turnstore"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

// findTurn reads the turn a path's ID names within scope: for a tenant, the turn stored under the
// ID derived from the client's (wire.ClientTurnKey) or under the ID itself, if it is the tenant's.
func (h *Handler) findTurn(ctx context.Context, id uuid.UUID, scope string) (TurnView, error) {
	var row pgx.Row
	if scope == "" {
		row = h.d.Pool.QueryRow(ctx, `SELECT `+viewColumns+` FROM turns t WHERE t.turn_id = $1`, id)
	} else {
		row = h.d.Pool.QueryRow(ctx, `SELECT `+viewColumns+` FROM turns t WHERE t.turn_id IN ($1, $2) AND t.tenant = $3
			ORDER BY t.turn_id = $1 DESC LIMIT 1`, wire.ClientTurnKey(scope, id), id, scope)
	}
	v, err := h.scanView(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return v, turnstore.ErrNotFound
	}
	return v, err
}

// loadTurn answers the path's turn, or the refusal itself.
func (h *Handler) loadTurn(w http.ResponseWriter, r *http.Request) (TurnView, bool) {
	id, ok := h.parseID(chi.URLParam(r, "turn_id"))
	if !ok {
		refuse(w, httpx.ProblemInvalidTurnID.Problem("turn_id must be a UUID"))
		return TurnView{}, false
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	v, err := h.findTurn(ctx, id, scope(r))
	if errors.Is(err, turnstore.ErrNotFound) {
		h.d.Submit.FlushQueued(ctx)
		v, err = h.findTurn(ctx, id, scope(r))
	}
	switch {
	case errors.Is(err, turnstore.ErrNotFound):
		refuse(w, httpx.ProblemTurnNotFound.Problem("no such turn"))
		return v, false
	case err != nil:
		h.storeFault(w, r, "the turn", err)
		return v, false
	}
	return v, true
}

func (h *Handler) getTurn(w http.ResponseWriter, r *http.Request) {
	if v, ok := h.loadTurn(w, r); ok {
		httpx.WriteJSON(w, http.StatusOK, v)
	}
}

// Lease is the turn's current (or last) lease as its row holds it.
type Lease struct {
	Owner        string     `json:"owner,omitempty"`
	ExpiresAt    *time.Time `json:"expires_at,omitempty"`
	FencingToken int64      `json:"fencing_token"`
	Redrives     int        `json:"redrives"`
	Partition    *int32     `json:"kafka_partition,omitempty"`
	Offset       *int64     `json:"kafka_offset,omitempty"`
}

// Attempt is one attempt of a turn: its row of turn_attempts (written by the worker's claim and
// by the statement that ended it), with its events in the session's stream where the row does not
// say. A turn that ran before the attempts were recorded has its attempts from its events only.
type Attempt struct {
	Attempt int `json:"attempt"`
	// Worker is the identity of the worker that held the attempt's lease, under FencingToken.
	Worker       string     `json:"worker,omitempty"`
	FencingToken int64      `json:"fencing_token,omitempty"`
	StartedAt    *time.Time `json:"started_at,omitempty"`
	// LeaseExpiresAt is when the attempt's lease ends (a running attempt's, renewed) or ended had
	// the attempt not ended first.
	LeaseExpiresAt *time.Time `json:"lease_expires_at,omitempty"`
	EndedAt        *time.Time `json:"ended_at,omitempty"`
	// Outcome is succeeded, failed, cancelled or expired (the attempt ended the turn), retried (it
	// failed and another attempt followed), handed_off (its worker drained), lease_lost (its
	// worker died or lost the lease, and the turn went on without it), or "" while it runs.
	Outcome string `json:"outcome,omitempty"`
	Error   string `json:"error,omitempty"`
	// Upstream is the endpoint of the attempt's last upstream request.
	Upstream string `json:"upstream,omitempty"`
	// Events counts the events the attempt published (from its row once it ended, else from the
	// stream); Waits its announced waits on its upstream.
	Events int `json:"events"`
	Waits  int `json:"waits"`
}

// Event is one entry of the turn's events.
type Event struct {
	ID      string          `json:"id"`
	Type    string          `json:"type"`
	Attempt int             `json:"attempt"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// Notification is one webhook delivery of the turn.
type Notification struct {
	ID          int64      `json:"id"`
	URL         string     `json:"url"`
	Status      string     `json:"status"`
	Attempts    int        `json:"attempts"`
	CreatedAt   time.Time  `json:"created_at"`
	DeliveredAt *time.Time `json:"delivered_at,omitempty"`
	DeadAt      *time.Time `json:"dead_at,omitempty"`
	LastError   string     `json:"last_error,omitempty"`
}

// Timeline is everything recorded of a turn.
type Timeline struct {
	Turn          TurnView       `json:"turn"`
	Lease         Lease          `json:"lease"`
	Attempts      []Attempt      `json:"attempts"`
	Events        []Event        `json:"events"`
	Notifications []Notification `json:"notifications"`
	// Replays are the turns replaying this one.
	Replays []string `json:"replays"`
}

func (h *Handler) timeline(w http.ResponseWriter, r *http.Request) {
	v, ok := h.loadTurn(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	tl := Timeline{Turn: v, Attempts: []Attempt{}, Events: []Event{}, Notifications: []Notification{}, Replays: []string{}}
	var session wire.SessionKey
	err := h.d.Pool.QueryRow(ctx, `SELECT session_id, coalesce(lease_owner, ''), lease_expires_at, fencing_token, redrives,
		kafka_partition, kafka_offset FROM turns WHERE turn_id = $1`, v.id).
		Scan(&session, &tl.Lease.Owner, &tl.Lease.ExpiresAt, &tl.Lease.FencingToken, &tl.Lease.Redrives, &tl.Lease.Partition, &tl.Lease.Offset)
	if err != nil {
		h.storeFault(w, r, "the timeline", err)
		return
	}
	rows, err := h.d.Pool.Query(ctx, `SELECT id, url, status, attempts, created_at, delivered_at, dead_at, coalesce(last_error, '')
		FROM turn_notifications WHERE turn_id = $1 ORDER BY id`, v.id)
	if err == nil {
		tl.Notifications, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (Notification, error) {
			var n Notification
			return n, row.Scan(&n.ID, &n.URL, &n.Status, &n.Attempts, &n.CreatedAt, &n.DeliveredAt, &n.DeadAt, &n.LastError)
		})
	}
	if err == nil {
		rows, err = h.d.Pool.Query(ctx, `SELECT turn_id FROM turn_replays WHERE original_turn_id = $1 ORDER BY created_at`, v.id)
	}
	if err == nil {
		var ids []uuid.UUID
		ids, err = pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		for _, id := range ids {
			tl.Replays = append(tl.Replays, h.showID(id))
		}
	}
	if err != nil {
		h.storeFault(w, r, "the timeline", err)
		return
	}
	if tl.Notifications == nil {
		tl.Notifications = []Notification{}
	}
	shown := v.TurnID
	if v.ClientTurnID != "" {
		shown = v.ClientTurnID
	}
	var streamed []Attempt
	tl.Events, streamed = h.events(ctx, session, shown)
	recorded, err := h.attempts(ctx, v, tl.Lease)
	if err != nil {
		h.storeFault(w, r, "the timeline", err)
		return
	}
	tl.Attempts = mergeAttempts(recorded, streamed)
	httpx.WriteJSON(w, http.StatusOK, tl)
}

// attempts reads the turn's rows of turn_attempts, oldest first. An attempt without an end whose
// lease the turn no longer holds under its token was lost: its worker died or lost the lease.
func (h *Handler) attempts(ctx context.Context, v TurnView, lease Lease) ([]Attempt, error) {
	rows, err := h.d.Pool.Query(ctx, `SELECT attempt, worker, fencing_token, started_at, lease_expires_at, ended_at,
		coalesce(outcome, ''), coalesce(error, ''), coalesce(upstream, ''), events, waits
		FROM turn_attempts WHERE turn_id = $1 ORDER BY fencing_token`, v.id)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Attempt, error) {
		var a Attempt
		var started, expires time.Time
		var events, waits *int
		err := row.Scan(&a.Attempt, &a.Worker, &a.FencingToken, &started, &expires, &a.EndedAt, &a.Outcome, &a.Error,
			&a.Upstream, &events, &waits)
		a.StartedAt, a.LeaseExpiresAt = &started, &expires
		if events != nil {
			a.Events = *events
		}
		if waits != nil {
			a.Waits = *waits
		}
		current := v.Status == string(wire.StatusRunning) && a.FencingToken == lease.FencingToken
		switch {
		case a.EndedAt != nil:
		case current:
			a.LeaseExpiresAt = lease.ExpiresAt
		default:
			a.Outcome = "lease_lost"
		}
		return a, err
	})
}

// mergeAttempts is the recorded attempts with what their events add (the counts of one still
// running or lost, the start of its first event), or the attempts the events show when none was
// recorded (a turn that ran before they were).
func mergeAttempts(recorded, streamed []Attempt) []Attempt {
	if len(recorded) == 0 {
		return streamed
	}
	byNumber := make(map[int]*Attempt, len(streamed))
	for i := range streamed {
		byNumber[streamed[i].Attempt] = &streamed[i]
	}
	for i := range recorded {
		a := &recorded[i]
		s, ok := byNumber[a.Attempt]
		if !ok || a.EndedAt != nil {
			continue
		}
		a.Events, a.Waits = s.Events, s.Waits
	}
	return recorded
}

// events reads the turn's entries of its session's stream (the turn named as its events name it)
// and sums them up by attempt. Without Redis, or with its entries trimmed, there are none.
func (h *Handler) events(ctx context.Context, session wire.SessionKey, shown string) ([]Event, []Attempt) {
	evs, atts := []Event{}, []Attempt{}
	if h.d.Redis == nil {
		return evs, atts
	}
	msgs, err := h.d.Redis.XRevRangeN(ctx, streams.KeysFor(h.cfg.KeyPrefix, session).Events, "+", "-", timelineEventsMax).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		h.d.Log.WarnContext(ctx, "admin: timeline events not read", "err", err)
		return evs, atts
	}
	byAttempt := map[int]int{}
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i]
		if fmt.Sprint(m.Values["turn"]) != shown {
			continue
		}
		e := Event{ID: m.ID, Type: fmt.Sprint(m.Values["type"]), Data: json.RawMessage(fmt.Sprint(m.Values["data"]))}
		var d struct {
			Attempt  int    `json:"attempt"`
			Previous int    `json:"previous_attempt"`
			Error    string `json:"error"`
		}
		if json.Unmarshal(e.Data, &d) != nil {
			e.Data = nil
		}
		e.Attempt = d.Attempt
		evs = append(evs, e)
		n, ok := byAttempt[d.Attempt]
		if !ok {
			atts = append(atts, Attempt{Attempt: d.Attempt})
			n = len(atts) - 1
			byAttempt[d.Attempt] = n
		}
		a := &atts[n]
		a.Events++
		switch e.Type {
		case "turn.started":
			if ms, err := strconv.ParseInt(m.ID[:max(0, strings.IndexByte(m.ID, '-'))], 10, 64); err == nil {
				at := time.UnixMilli(ms).UTC()
				a.StartedAt = &at
			}
		case "turn.waiting":
			a.Waits++
		case "turn.retrying":
			// The next attempt's first event ends the one before it.
			if p, ok := byAttempt[d.Previous]; ok && atts[p].Outcome == "" {
				atts[p].Outcome = "retried"
			}
		case "turn.completed", "turn.failed", "turn.cancelled", "turn.expired":
			a.Outcome, a.Error = eventOutcomes[e.Type], d.Error
		}
	}
	return evs, atts
}

// eventOutcomes names an attempt's outcome after the event that ended it, as Attempt.Outcome does.
var eventOutcomes = map[string]string{
	"turn.completed": "succeeded", "turn.failed": "failed", "turn.cancelled": "cancelled", "turn.expired": "expired",
}

// Blockers is what holds a turn back: the live turns its session accepted before it, oldest
// first (the claim starts a turn only once every earlier one has ended).
type Blockers struct {
	Turn     TurnView   `json:"turn"`
	Blocking []TurnView `json:"blocking"`
}

func (h *Handler) blockers(w http.ResponseWriter, r *http.Request) {
	v, ok := h.loadTurn(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	rows, err := h.d.Pool.Query(ctx, `SELECT `+viewColumns+` FROM turns t
		WHERE t.session_id = (SELECT session_id FROM turns WHERE turn_id = $1)
		  AND t.status IN ('queued', 'running') AND t.accepted_at < $2 AND t.turn_id <> $1
		ORDER BY t.accepted_at, t.turn_id LIMIT $3`, v.id, v.AcceptedAt, PageSizeMax)
	if err != nil {
		h.storeFault(w, r, "the blockers", err)
		return
	}
	b := Blockers{Turn: v}
	b.Blocking, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (TurnView, error) { return h.scanView(row) })
	if err != nil {
		h.storeFault(w, r, "the blockers", err)
		return
	}
	if b.Blocking == nil {
		b.Blocking = []TurnView{}
	}
	httpx.WriteJSON(w, http.StatusOK, b)
}

// Acted is the answer of an action on one turn.
type Acted struct {
	TurnID  string `json:"turn_id"`
	Outcome string `json:"outcome"`
	// Replay is the new turn of a replay.
	Replay *TurnView `json:"replay,omitempty"`
}

func (h *Handler) cancelTurn(w http.ResponseWriter, r *http.Request) {
	v, ok := h.loadTurn(w, r)
	if !ok {
		h.record(r, "turn.cancel", chi.URLParam(r, "turn_id"), nil, "refused", "no such turn")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	outcome, err := h.actor().cancel(ctx, v.id)
	if err != nil {
		h.record(r, "turn.cancel", v.TurnID, nil, outcomeFailed, err.Error())
		h.storeFault(w, r, "the cancel", err)
		return
	}
	h.record(r, "turn.cancel", v.TurnID, nil, outcome, "")
	httpx.WriteJSON(w, http.StatusAccepted, Acted{TurnID: v.TurnID, Outcome: outcome})
}

func (h *Handler) replayTurn(w http.ResponseWriter, r *http.Request) {
	v, ok := h.loadTurn(w, r)
	if !ok {
		h.record(r, "turn.replay", chi.URLParam(r, "turn_id"), nil, "refused", "no such turn")
		return
	}
	var opts ReplayOptions
	if p := readJSON(w, r, &opts); p != nil {
		h.record(r, "turn.replay", v.TurnID, nil, "refused", p.Detail)
		refuse(w, *p)
		return
	}
	if err := opts.validate(h.d.Submit); err != nil {
		h.record(r, "turn.replay", v.TurnID, opts, "refused", err.Error())
		refuse(w, httpx.ProblemValidation.Problem(err.Error()))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	newID, err := uuid.NewV7()
	if err != nil {
		h.storeFault(w, r, "the replay", err)
		return
	}
	err = h.actor().replay(ctx, v.id, newID, nil, principal(r).KeyID, opts)
	switch {
	case errors.Is(err, errLive):
		h.record(r, "turn.replay", v.TurnID, opts, "refused", err.Error())
		refuse(w, httpx.ProblemTurnLive.Problem(err.Error()))
		return
	case err != nil:
		h.record(r, "turn.replay", v.TurnID, opts, outcomeFailed, err.Error())
		h.d.Log.WarnContext(ctx, "admin: replay failed", "turn_id", v.TurnID, "err", err)
		refuse(w, httpx.ProblemKafkaUnavail.Problem("the replay could not be queued; retry"))
		return
	}
	h.record(r, "turn.replay", v.TurnID, opts, outcomeDone, "replay "+h.showID(newID))
	h.d.Submit.FlushQueued(ctx)
	nv, err := h.findTurn(ctx, newID, "")
	if err != nil { // its row is written a moment later; the ID is what matters
		nv = TurnView{
			TurnID: h.showID(newID), Tenant: v.Tenant, SessionID: v.SessionID, Agent: v.Agent,
			Status: string(wire.StatusQueued), ReplayOf: v.TurnID,
		}
	}
	w.Header().Set("Location", "/v1/admin/turns/"+nv.TurnID)
	httpx.WriteJSON(w, http.StatusAccepted, Acted{TurnID: v.TurnID, Outcome: outcomeDone, Replay: &nv})
}

func (h *Handler) actor() *actor {
	return &actor{
		pool: h.d.Pool, store: turnstore.New(h.d.Pool), events: h.d.Events, submit: h.d.Submit,
		region: h.cfg.Region, deadline: h.cfg.DefaultDeadline, log: h.d.Log,
	}
}

// StreamGrant is the answer of POST /v1/admin/turns/{turn_id}/stream-token: a stream token for
// the turn's session, whose events (the gateway's SSE at StreamURL) show the turn live.
type StreamGrant struct {
	TurnID      string `json:"turn_id"`
	Tenant      string `json:"tenant"`
	SessionID   string `json:"session_id"`
	StreamURL   string `json:"stream_url"`
	StreamToken string `json:"stream_token"`
}

// streamToken mints a stream token for the session of a turn the caller may see: an admin key
// follows any tenant's turn, a tenant's key its own (another tenant's turn is a 404, as in every
// admin route). The token names the turn's tenant, so it reads that tenant's session only.
func (h *Handler) streamToken(w http.ResponseWriter, r *http.Request) {
	if h.d.Signer == nil {
		refuse(w, httpx.ProblemStoreUnavail.Problem("stream tokens are not available here"))
		return
	}
	v, ok := h.loadTurn(w, r)
	if !ok {
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, http.StatusOK, StreamGrant{
		TurnID: v.TurnID, Tenant: v.Tenant, SessionID: v.SessionID,
		StreamURL:   "/v1/sessions/" + url.PathEscape(v.SessionID) + "/events",
		StreamToken: h.d.Signer.SignKey(principal(r).KeyID, v.Tenant, v.SessionID),
	})
}
