package lease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/turnstile-run/turnstile/pkg/wire"
)

// Outcome is what a claim found.
type Outcome string

// Claim outcomes.
const (
	// Acquired: this worker now holds the lease; run the turn with the returned token.
	Acquired Outcome = "ACQUIRED"
	// Done: the turn already ended; acknowledge the record without running it.
	Done Outcome = "DONE"
	// Leased: a live worker holds the lease; wait for it rather than run the turn twice.
	Leased Outcome = "LEASED"
	// Cancelled: cancellation was requested before this attempt could start.
	Cancelled Outcome = "CANCELLED"
	// Exhausted: the last allowed attempt died without finishing (a crash loop); fail the turn.
	Exhausted Outcome = "EXHAUSTED"
)

// ErrFenced is returned when a statement's fencing token is no longer the turn's: another attempt
// took over, or the turn ended.
var ErrFenced = errors.New("fencing token is stale")

// Claim is the result of Store.Claim.
type Claim struct {
	Outcome Outcome
	Attempt int
	Token   int64
	// Status is the row's status when the outcome is Done.
	Status wire.Status
	// LeaseExpiresAt is when the current holder's lease ends (Leased) or this worker's (Acquired).
	LeaseExpiresAt time.Time
}

// Store runs the lease statements.
type Store struct {
	pool        *pgxpool.Pool
	owner       string
	ttl         time.Duration
	maxAttempts int
}

// NewStore returns a store that claims as owner with leases of ttl, allowing maxAttempts attempts.
func NewStore(pool *pgxpool.Pool, owner string, ttl time.Duration, maxAttempts int) *Store {
	return &Store{pool: pool, owner: owner, ttl: ttl, maxAttempts: maxAttempts}
}

// TTL is the lease duration.
func (s *Store) TTL() time.Duration { return s.ttl }

// ClaimRequest carries what the claim records about the turn from its envelope.
type ClaimRequest struct {
	Env       wire.Envelope
	Partition int32
	Offset    int64
}

// claimSQL inserts the turn as running, or takes over a queued turn or one whose lease expired,
// in one statement. When it takes nothing, it reports the row as it was.
const claimSQL = `
WITH prev AS (
    SELECT status, attempt, handoffs, fencing_token, lease_expires_at, cancel_requested
    FROM turns WHERE turn_id = $1
), claimed AS (
    INSERT INTO turns AS t (turn_id, session_id, tenant, status, attempt, fencing_token, lease_owner,
        lease_expires_at, input, metadata, accepted_at, deadline, started_at, kafka_partition, kafka_offset)
    VALUES ($1, $2, $3, 'running', 1, nextval('fencing_token_seq'), $4, now() + $5 * interval '1 millisecond',
        $6, $7, $8, $9, now(), $10, $11)
    ON CONFLICT (turn_id) DO UPDATE SET
        status = 'running',
        attempt = t.attempt + 1,
        fencing_token = nextval('fencing_token_seq'),
        lease_owner = EXCLUDED.lease_owner,
        lease_expires_at = EXCLUDED.lease_expires_at,
        input = EXCLUDED.input,
        metadata = EXCLUDED.metadata,
        deadline = EXCLUDED.deadline,
        started_at = coalesce(t.started_at, now()),
        kafka_partition = EXCLUDED.kafka_partition,
        kafka_offset = EXCLUDED.kafka_offset,
        updated_at = now()
    WHERE NOT t.cancel_requested
      AND t.attempt - t.handoffs < $12
      AND (t.status = 'queued' OR (t.status = 'running' AND t.lease_expires_at < now()))
    RETURNING t.attempt, t.fencing_token, t.lease_expires_at
)
SELECT 'ACQUIRED', c.attempt, c.fencing_token, 'running', c.lease_expires_at FROM claimed c
UNION ALL
SELECT CASE
        WHEN p.status NOT IN ('queued', 'running') THEN 'DONE'
        WHEN p.status = 'running' AND p.lease_expires_at >= now() THEN 'LEASED'
        WHEN p.cancel_requested THEN 'CANCELLED'
        ELSE 'EXHAUSTED'
    END,
    p.attempt, p.fencing_token, p.status, coalesce(p.lease_expires_at, now())
FROM prev p WHERE NOT EXISTS (SELECT 1 FROM claimed)`

// Claim takes the turn's lease if it can.
func (s *Store) Claim(ctx context.Context, req ClaimRequest) (Claim, error) {
	e := req.Env
	input, err := json.Marshal(e.Input)
	if err != nil {
		return Claim{}, fmt.Errorf("encode turn input: %w", err)
	}
	var md []byte
	if e.Metadata != nil {
		if md, err = json.Marshal(e.Metadata); err != nil {
			return Claim{}, fmt.Errorf("encode turn metadata: %w", err)
		}
	}
	tenant := e.Tenant
	if tenant == "" {
		tenant = "default"
	}
	// A concurrent first insert by another worker leaves both CTE branches empty for this statement
	// (its snapshot predates that row); running it again sees the row.
	for range 3 {
		var c Claim
		var outcome, status string
		err := s.pool.QueryRow(ctx, claimSQL, e.TurnID, e.SessionID, tenant, s.owner, s.ttl.Milliseconds(),
			input, md, e.AcceptedAt, e.Deadline, req.Partition, req.Offset, s.maxAttempts).
			Scan(&outcome, &c.Attempt, &c.Token, &status, &c.LeaseExpiresAt)
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		if err != nil {
			return Claim{}, fmt.Errorf("claim turn: %w", err)
		}
		c.Outcome, c.Status = Outcome(outcome), wire.Status(status)
		return c, nil
	}
	return Claim{}, errors.New("claim turn: row changed under three consecutive claims")
}

// Renewal is the result of renewing one lease.
type Renewal struct {
	TurnID          uuid.UUID
	CancelRequested bool
}

// Held names a lease this worker holds.
type Held struct {
	TurnID uuid.UUID
	Token  int64
}

// Renew extends every given lease in one statement and returns those still held, with their cancel
// flags. A lease missing from the result is lost: fenced by a newer attempt, or the turn ended.
func (s *Store) Renew(ctx context.Context, held []Held) ([]Renewal, error) {
	if len(held) == 0 {
		return nil, nil
	}
	ids := make([]uuid.UUID, len(held))
	tokens := make([]int64, len(held))
	for i, h := range held {
		ids[i], tokens[i] = h.TurnID, h.Token
	}
	rows, err := s.pool.Query(ctx, `
		UPDATE turns t SET lease_expires_at = now() + $3 * interval '1 millisecond', updated_at = now()
		FROM unnest($1::uuid[], $2::bigint[]) AS l(turn_id, token)
		WHERE t.turn_id = l.turn_id AND t.fencing_token = l.token AND t.status = 'running'
		RETURNING t.turn_id, t.cancel_requested`, ids, tokens, s.ttl.Milliseconds())
	if err != nil {
		return nil, fmt.Errorf("renew leases: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Renewal, error) {
		var rn Renewal
		err := r.Scan(&rn.TurnID, &rn.CancelRequested)
		return rn, err
	})
	if err != nil {
		return nil, fmt.Errorf("renew leases: %w", err)
	}
	return out, nil
}

// Release gives up a lease so another worker can take the turn over at once. handoff marks a
// release on drain, which does not count towards the attempt limit; a release after a failed
// attempt does.
func (s *Store) Release(ctx context.Context, turnID uuid.UUID, token int64, handoff bool) error {
	inc := 0
	if handoff {
		inc = 1
	}
	tag, err := s.pool.Exec(ctx, `
		UPDATE turns SET lease_expires_at = now() - interval '1 millisecond', lease_owner = NULL,
			handoffs = handoffs + $3, updated_at = now()
		WHERE turn_id = $1 AND fencing_token = $2 AND status = 'running'`, turnID, token, inc)
	if err != nil {
		return fmt.Errorf("release lease: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return ErrFenced
	}
	return nil
}

// RecordError stores the error of a failed attempt on the row while the lease is still held, so the
// turn's status shows why it is being retried.
func (s *Store) RecordError(ctx context.Context, turnID uuid.UUID, token int64, msg string) error {
	_, err := s.pool.Exec(ctx, `UPDATE turns SET error = $3, updated_at = now()
		WHERE turn_id = $1 AND fencing_token = $2 AND status = 'running'`, turnID, token, msg)
	if err != nil {
		return fmt.Errorf("record attempt error: %w", err)
	}
	return nil
}

// completeSQL marks the turn succeeded and appends the user and assistant messages to the session
// history in one statement, conditional on the token.
const completeSQL = `
WITH done AS (
    UPDATE turns SET status = 'succeeded', output = $3, error = NULL, finished_at = now(),
        lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
    WHERE turn_id = $1 AND fencing_token = $2 AND status = 'running'
    RETURNING turn_id, session_id, tenant, input->>'text' AS text
), seq AS (
    INSERT INTO sessions AS s (session_id, tenant, last_seq)
    SELECT session_id, tenant, 2 FROM done
    ON CONFLICT (session_id) DO UPDATE SET last_seq = s.last_seq + 2, updated_at = now()
    RETURNING s.last_seq
), msgs AS (
    INSERT INTO session_messages (session_id, seq, turn_id, role, content)
    SELECT d.session_id, q.last_seq - 1, d.turn_id, 'user', coalesce(d.text, '') FROM done d, seq q
    UNION ALL
    SELECT d.session_id, q.last_seq, d.turn_id, 'assistant', $4 FROM done d, seq q
)
SELECT count(*) FROM done`

// Complete marks the turn succeeded with output and appends its messages to the session history.
func (s *Store) Complete(ctx context.Context, turnID uuid.UUID, token int64, output wire.Output) error {
	out, err := json.Marshal(output)
	if err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	var n int
	if err := s.pool.QueryRow(ctx, completeSQL, turnID, token, out, output.Text).Scan(&n); err != nil {
		return fmt.Errorf("complete turn: %w", err)
	}
	if n == 0 {
		return ErrFenced
	}
	return nil
}

// Finish ends a turn this worker holds with a terminal status other than succeeded. A non-empty
// deadLetter marks the turn as owed to the dead-letter topic for that reason (see DeadLettered).
func (s *Store) Finish(ctx context.Context, turnID uuid.UUID, token int64, status wire.Status, msg, deadLetter string) error {
	tag, err := s.pool.Exec(ctx, `
		UPDATE turns SET status = $3, error = nullif($4, ''), finished_at = now(),
			dead_letter_reason = nullif($5, ''), lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
		WHERE turn_id = $1 AND fencing_token = $2 AND status = 'running'`, turnID, token, string(status), msg, deadLetter)
	if err != nil {
		return fmt.Errorf("finish turn as %s: %w", status, err)
	}
	if tag.RowsAffected() == 0 {
		return ErrFenced
	}
	return nil
}

// FinishUnleased ends a turn that nobody holds (queued, or running with an expired lease) — a
// cancelled or exhausted turn — and returns the fresh token its final events are published with.
func (s *Store) FinishUnleased(ctx context.Context, turnID uuid.UUID, status wire.Status, msg, deadLetter string) (token int64, attempt int, err error) {
	err = s.pool.QueryRow(ctx, `
		UPDATE turns SET status = $2, error = nullif($3, ''), finished_at = now(), dead_letter_reason = nullif($4, ''),
			fencing_token = nextval('fencing_token_seq'), lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
		WHERE turn_id = $1 AND (status = 'queued' OR (status = 'running' AND lease_expires_at < now()))
		RETURNING fencing_token, attempt`, turnID, string(status), msg, deadLetter).Scan(&token, &attempt)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, ErrFenced
	}
	if err != nil {
		return 0, 0, fmt.Errorf("finish unleased turn as %s: %w", status, err)
	}
	return token, attempt, nil
}

// Outcome of a finished turn, for re-publishing its terminal event after a crash.
type Final struct {
	Status  wire.Status
	Attempt int
	Token   int64
	Output  wire.Output
	Error   string
	// DeadLetter is the reason the turn is still owed to the dead-letter topic, or empty.
	DeadLetter string
}

// Final reads a finished turn's outcome.
func (s *Store) Final(ctx context.Context, turnID uuid.UUID) (Final, error) {
	var f Final
	var status string
	var out []byte
	err := s.pool.QueryRow(ctx, `SELECT status, attempt, fencing_token, output, coalesce(error, ''),
		coalesce(dead_letter_reason, '') FROM turns WHERE turn_id = $1`, turnID).
		Scan(&status, &f.Attempt, &f.Token, &out, &f.Error, &f.DeadLetter)
	if err != nil {
		return Final{}, fmt.Errorf("read finished turn: %w", err)
	}
	f.Status = wire.Status(status)
	if len(out) > 0 {
		_ = json.Unmarshal(out, &f.Output)
	}
	return f, nil
}

// DeadLettered records that the turn's dead letter was acknowledged by Kafka.
func (s *Store) DeadLettered(ctx context.Context, turnID uuid.UUID) error {
	if _, err := s.pool.Exec(ctx, `UPDATE turns SET dead_letter_reason = NULL WHERE turn_id = $1`, turnID); err != nil {
		return fmt.Errorf("record dead letter: %w", err)
	}
	return nil
}

// History returns a session's messages, oldest first.
func (s *Store) History(ctx context.Context, sessionID string) ([]HistoryMessage, error) {
	rows, err := s.pool.Query(ctx, `SELECT seq, turn_id, role, content FROM session_messages
		WHERE session_id = $1 ORDER BY seq`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("read session history: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (HistoryMessage, error) {
		var m HistoryMessage
		err := r.Scan(&m.Seq, &m.TurnID, &m.Role, &m.Content)
		return m, err
	})
}

// HistoryMessage is one row of the session history.
type HistoryMessage struct {
	Seq     int64
	TurnID  uuid.UUID
	Role    string
	Content string
}

// expireSQL ends a turn that must not start because its deadline is too near: it is recorded
// expired without ever being claimed (no attempt, no start time). A turn leased by a live worker,
// already finished, or cancelled is left alone; the caller's claim then reports which.
const expireSQL = `
INSERT INTO turns AS t (turn_id, session_id, tenant, status, fencing_token, input, metadata, accepted_at,
    deadline, finished_at, error, kafka_partition, kafka_offset)
VALUES ($1, $2, $3, 'expired', nextval('fencing_token_seq'), $4, $5, $6, $7, now(), $8, $9, $10)
ON CONFLICT (turn_id) DO UPDATE SET status = 'expired', error = EXCLUDED.error, finished_at = now(),
    fencing_token = nextval('fencing_token_seq'), lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
WHERE NOT t.cancel_requested
  AND (t.status = 'queued' OR (t.status = 'running' AND t.lease_expires_at < now()))
RETURNING t.fencing_token, t.attempt`

// Expire records the turn as expired unless someone holds it or it ended, and returns the fresh token
// its turn.expired event is published with. ErrFenced means it was left alone.
func (s *Store) Expire(ctx context.Context, req ClaimRequest, msg string) (token int64, attempt int, err error) {
	e := req.Env
	input, err := json.Marshal(e.Input)
	if err != nil {
		return 0, 0, fmt.Errorf("encode turn input: %w", err)
	}
	var md []byte
	if e.Metadata != nil {
		if md, err = json.Marshal(e.Metadata); err != nil {
			return 0, 0, fmt.Errorf("encode turn metadata: %w", err)
		}
	}
	tenant := e.Tenant
	if tenant == "" {
		tenant = "default"
	}
	err = s.pool.QueryRow(ctx, expireSQL, e.TurnID, e.SessionID, tenant, input, md, e.AcceptedAt, e.Deadline,
		msg, req.Partition, req.Offset).Scan(&token, &attempt)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, ErrFenced
	}
	if err != nil {
		return 0, 0, fmt.Errorf("expire turn: %w", err)
	}
	return token, attempt, nil
}
