package turnstore

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/turnstile-run/turnstile/pkg/pgarray"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

// ClaimOutcome is what the claim statement found for one turn.
type ClaimOutcome string

// Claim outcomes.
const (
	// ClaimAcquired: the statement took the lease.
	ClaimAcquired ClaimOutcome = "ACQUIRED"
	// ClaimDone: the turn already ended.
	ClaimDone ClaimOutcome = "DONE"
	// ClaimLeased: a live lease is held by someone else.
	ClaimLeased ClaimOutcome = "LEASED"
	// ClaimCancelled: cancellation was requested before an attempt could start.
	ClaimCancelled ClaimOutcome = "CANCELLED"
	// ClaimExhausted: the turn has used its attempts.
	ClaimExhausted ClaimOutcome = "EXHAUSTED"
	// ClaimBlocked: an earlier accepted turn of the session is not terminal, so this one may not
	// start yet. It is no attempt and no failure; the row, if any, is left as it was, which the
	// statement also reports (any outcome of that row takes precedence over this one).
	ClaimBlocked ClaimOutcome = "BLOCKED"
	// ClaimPaused: a queue pause covers the turn (its tenant's, its agent's, or that tenant's of
	// that agent): it may not start until resumed. Like ClaimBlocked it is no attempt; the turn's
	// row is written queued when it had none, and a row as it was takes precedence.
	ClaimPaused ClaimOutcome = "PAUSED"
)

// ClaimParams are the turns one claim statement takes, as column arrays with one element per turn
// (every turn ID once), and the lease it takes them with.
type ClaimParams struct {
	TurnIDs pgarray.UUIDs
	// SessionKeys are the turns' session keys, each a wire.SessionKey's String form.
	SessionKeys pgarray.Texts
	Tenants     pgarray.Texts
	// Inputs are the inputs' texts: the statement builds the stored input object from its text (see
	// wire.Input).
	Inputs pgarray.Texts
	// Metadata are the turns' metadata objects as JSON.
	Metadata    [][]byte
	AcceptedAt  pgarray.Times
	Deadlines   pgarray.Times
	Partitions  pgarray.Ints
	Offsets     pgarray.Ints
	Owner       string
	TTL         time.Duration
	MaxAttempts int
	// ClientTurnIDs are the IDs the clients minted (wire.ClientTurnKey), nil where the turn ID is
	// the client's already.
	ClientTurnIDs []*uuid.UUID
	// Notifications are the turns' webhooks, push configs and tasks. A claim that takes over a
	// row keeps the row's webhook when its record names none (a re-driven record, produced again
	// from the row, carries none) and sets the task its record names, as it sets the metadata.
	Notifications Notifications
	// Agents are the turns' agents (wire.Envelope.Agent), NULL (an invalid element) for the
	// default agent of a record that names none.
	Agents pgarray.Texts
	// Priorities are the turns' priorities (wire.Envelope.PriorityOf), as intake's queued rows
	// record them: a claim may write a turn's row first.
	Priorities pgarray.Ints
	// Agent is the catalog name of the agent whose turns these are (a worker's lane claims one
	// agent's turns), for the queue pauses of that agent.
	Agent string
}

// args are claimSQL's arguments.
func (p *ClaimParams) args() []any {
	urls, tokens, configs, tasks := p.Notifications.args()
	return []any{
		p.TurnIDs, p.SessionKeys, p.Tenants, p.Inputs, p.Metadata, p.AcceptedAt, p.Deadlines, p.Partitions,
		p.Offsets, p.Owner, p.TTL.Milliseconds(), p.MaxAttempts, p.ClientTurnIDs, urls, tokens, configs, tasks, p.Agents,
		p.Agent, p.Priorities,
	}
}

// ClaimRow is one row of the claim statement's result. A turn it took has a row with
// ClaimAcquired; a turn it refused to start for its session's order has a row with ClaimBlocked; a turn whose row existed before the statement also has a row for that row as it
// was, with the outcome it implies had the turn not been taken. A turn may so have two rows, one
// (its row was inserted by someone else after the statement's snapshot), or none.
type ClaimRow struct {
	TurnID uuid.UUID
	// Outcome is empty when the row as it was was claimable: unless the statement took it, it
	// changed under the statement.
	Outcome ClaimOutcome
	Attempt int
	Token   wire.FenceToken
	// Status is the row's status: running for a claimed row.
	Status wire.Status
	// LeaseExpiresAt is when the lease ends (a claimed or a leased row).
	LeaseExpiresAt time.Time
	// SessionSeq is the session history's last sequence number (sessions.last_seq, 0 for a session
	// without history) in a claimed row, 0 in the others.
	SessionSeq int64
	// LeaseOwner is, in a row as it was, the owner of a running row's lease (live, or expired), and
	// empty once the lease was released (after a failed attempt, or on drain) or in other rows.
	// With the row's Token, it tells a claim that took the row over whose lease it took.
	LeaseOwner string
}

// claimSQL claims many turns at once: the requests arrive as arrays, are inserted as running (or
// take over a queued turn or one whose lease expired, unless cancellation was requested or the
// attempts are spent) in turn_id order — so two batches that share turns lock them in the same
// order and cannot deadlock.
//
// A request whose session has an earlier accepted turn that is not terminal (queued or running) is
// not taken: per-session order is kept where the claim is made, not only in a consumer's memory,
// so a session's later turn cannot start ahead of an earlier one whose record was lost or is
// re-driven behind it. That check is a probe of the partial index of live turns (migration 00100).
//
// It returns a row per turn taken (with the session's history sequence number), a row per turn
// blocked by its session's order, and a row per turn
// that existed before the statement (with the outcome that row, as it was, implies if the turn was
// not taken); the caller matches them to requests by turn_id.
//
// Nothing is joined to anything: the rows go back unjoined, and every lookup is a probe by primary
// key, per request (the turn as it was) or per claimed row (the session's sequence number). The plan
// therefore does not depend on statistics. Joins of the requests with turns, sessions or the CTEs,
// estimated from stale statistics as a handful of rows, are planned as sequential scans of turns
// and of all sessions, or as nested loops over the requests: a batch would cost more as the tables
// grow or with the square of the batch (TestStatementsProbeByKey).
//
// The push configs of the requests are stored by a CTE of the same statement (push_configs.sql).
//
//go:embed claim.sql
var claimTemplate string

var claimSQL = include(claimTemplate, "push_configs.sql", pushConfigsCTE)

// ClaimTurns runs the claim statement: it takes the lease of every turn of p that can be taken —
// inserted as running, or taken over when it is queued or its lease expired — and reports every
// row as ClaimRow describes. Deciding what each request's outcome is, and which to send again, is
// the caller's.
//
// The outcome and status are read as the driver's bytes and mapped to their constants (textConst),
// so reading a row allocates nothing of its own.
func (s *Store) ClaimTurns(ctx context.Context, p *ClaimParams) ([]ClaimRow, error) {
	rows, err := s.pool.Query(ctx, claimSQL, p.args()...)
	if err != nil {
		return nil, fmt.Errorf("claim turns: %w", err)
	}
	defer rows.Close()
	// A turn has at most two rows.
	out := make([]ClaimRow, 0, 2*len(p.TurnIDs))
	// Declared once: Scan's arguments escape, so each declared in the loop would be allocated per
	// row. Scan sets every field of r but the four set after it.
	var id [16]byte
	var outcome, status, owner pgtype.DriverBytes
	var r ClaimRow
	for rows.Next() {
		if err := rows.Scan(&id, &outcome, &r.Attempt, &r.Token, &status, &r.LeaseExpiresAt, &r.SessionSeq, &owner); err != nil {
			return nil, fmt.Errorf("claim turns: %w", err)
		}
		r.TurnID, r.Outcome, r.Status, r.LeaseOwner = id, "", textConst(status, statuses), ""
		if outcome != nil {
			r.Outcome = textConst(outcome, outcomes)
		}
		if owner != nil {
			// Only a running row as it was has one: a string for a turn leased or taken over.
			r.LeaseOwner = string(owner)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("claim turns: %w", err)
	}
	return out, nil
}

// The values ClaimTurns maps the statement's text columns to.
var (
	outcomes = []ClaimOutcome{ClaimAcquired, ClaimDone, ClaimLeased, ClaimCancelled, ClaimExhausted, ClaimBlocked, ClaimPaused}
	statuses = []wire.Status{
		wire.StatusQueued, wire.StatusRunning, wire.StatusSucceeded, wire.StatusFailed,
		wire.StatusCancelled, wire.StatusExpired,
	}
)

// textConst is the constant of known that b spells, without allocating, or b as a new string if it
// spells none of them.
func textConst[T ~string](b []byte, known []T) T {
	for _, k := range known {
		if string(k) == string(b) {
			return k
		}
	}
	return T(b)
}
