package lease

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/turnstile-run/turnstile/pkg/pgarray"
	"github.com/turnstile-run/turnstile/pkg/wire"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent"
	"github.com/turnstile-run/turnstile/services/worker/internal/batch"
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
	// SessionSeq is the session history's last sequence number (sessions.last_seq, 0 for a session
	// without history) as the claim read it. A session's turns run one at a time, so the history
	// cannot grow between an acquiring claim and the attempt: a history cache holding this sequence
	// number is current without asking Postgres again.
	SessionSeq int64
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
	Env wire.Envelope
	// RawMetadata is Env.Metadata as the record held it (wire.DecodeEnvelopeRaw), or nil: the claim
	// stores these bytes when Postgres takes them as they are (storableAsIs) instead of encoding
	// the map again, which was a twelfth of a busy worker's allocations.
	RawMetadata json.RawMessage
	Partition   int32
	Offset      int64
}

// Claim takes the turn's lease if it can: inserted as running, or taken over when it is queued or
// its lease expired. When it takes nothing, it reports the row as it was. It is ClaimMany of one
// request, so a single claim and a batch run the same statement under the same rules.
func (s *Store) Claim(ctx context.Context, req ClaimRequest) (Claim, error) {
	r := s.ClaimMany(ctx, []ClaimRequest{req})[0]
	return r.Val, r.Err
}

// claimManySQL claims many turns at once: the requests arrive as arrays, are inserted as running
// (or take over a queued turn or one whose lease expired, unless cancellation was requested or
// the attempts are spent) in turn_id order — so two batches that share turns lock them in the same
// order and cannot deadlock.
//
// It returns a row per turn taken (with the session's history sequence number) and a row per turn
// that existed before the statement (with the outcome that row, as it was, implies if the turn was
// not taken); the caller matches them to requests by turn_id (readClaims). A request with neither
// (its row was inserted by another worker after this statement's snapshot), or whose row as it was
// was claimable yet was not taken (it changed under the statement), is sent again.
//
// Nothing is joined to anything: the rows go back unjoined, and every lookup is a probe by primary
// key, per request (the turn as it was) or per claimed row (the session's sequence number). The plan
// therefore does not depend on statistics. Joins of the requests with turns, sessions or the CTEs,
// estimated from stale statistics as a handful of rows, were planned as sequential scans of turns
// and of all sessions, or as nested loops over the requests: a batch cost grew with the tables or
// with the square of the batch (TestStatementsProbeByKey).
const claimManySQL = `
WITH req AS (
    SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::jsonb[], $6::timestamptz[],
        $7::timestamptz[], $8::integer[], $9::bigint[])
        AS r(turn_id, session_id, tenant, input_text, metadata, accepted_at, deadline, kpart, koff)
), claimed AS (
    INSERT INTO turns AS t (turn_id, session_id, tenant, status, attempt, fencing_token, lease_owner,
        lease_expires_at, input, metadata, accepted_at, deadline, started_at, kafka_partition, kafka_offset)
    SELECT r.turn_id, r.session_id, r.tenant, 'running', 1, nextval('fencing_token_seq'), $10,
        now() + $11 * interval '1 millisecond', jsonb_build_object('text', r.input_text), r.metadata, r.accepted_at,
        r.deadline, now(), r.kpart, r.koff
    FROM req r ORDER BY r.turn_id
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
    RETURNING t.turn_id, t.session_id, t.attempt, t.fencing_token, t.lease_expires_at
)
SELECT c.turn_id, 'ACQUIRED', c.attempt, c.fencing_token, 'running', c.lease_expires_at,
    coalesce((SELECT s.last_seq FROM sessions s WHERE s.session_id = c.session_id), 0)
FROM claimed c
UNION ALL
SELECT p.turn_id,
    CASE
        WHEN p.status NOT IN ('queued', 'running') THEN 'DONE'
        WHEN p.status = 'running' AND p.lease_expires_at >= now() THEN 'LEASED'
        WHEN p.cancel_requested THEN 'CANCELLED'
        WHEN p.attempt - p.handoffs >= $12 THEN 'EXHAUSTED'
        ELSE NULL -- claimable by the snapshot, yet not taken: the row changed under the statement
    END,
    p.attempt, p.fencing_token, p.status, coalesce(p.lease_expires_at, now()), 0
FROM req r CROSS JOIN LATERAL (
    SELECT t.turn_id, t.status, t.attempt, t.handoffs, t.fencing_token, t.lease_expires_at, t.cancel_requested
    FROM turns t WHERE t.turn_id = r.turn_id OFFSET 0
) p`

// ClaimMany claims every request in one statement, each under Claim's rules, and returns one
// result per request in order. Requests for the same turn are claimed one after the other, as
// separate calls to Claim would. A statement error fails every request, except that a data error
// (one bad row) is isolated by claiming each request on its own, so one poison record cannot fail
// the claims of every turn batched with it.
func (s *Store) ClaimMany(ctx context.Context, reqs []ClaimRequest) []batch.Result[Claim] {
	out := make([]batch.Result[Claim], len(reqs))
	encoded := make([]claimRow, len(reqs))
	idx := make([]int, 0, len(reqs))
	for i, req := range reqs {
		row, err := encodeClaim(req)
		if err != nil {
			out[i].Err = err
			continue
		}
		encoded[i] = row
		idx = append(idx, i)
	}
	for _, round := range rounds(idx, func(i int) uuid.UUID { return reqs[i].Env.TurnID }) {
		s.claimRound(ctx, encoded, round, out)
	}
	return out
}

// claimRound claims the requests at positions pos of encoded (distinct turns) and writes their
// results to out.
func (s *Store) claimRound(ctx context.Context, encoded []claimRow, pos []int, out []batch.Result[Claim]) {
	for try := 0; ; try++ {
		a := claimArgsOf(encoded, pos)
		rows, err := s.pool.Query(ctx, claimManySQL, a.ids, a.sessions, a.tenants, a.inputs, a.metadata,
			a.accepted, a.deadlines, a.parts, a.offsets, s.owner, s.ttl.Milliseconds(), s.maxAttempts)
		var again []int
		if err == nil {
			again, err = readClaims(rows, pos, a.ids, out)
		}
		switch {
		case err == nil && len(again) == 0:
			return
		case err == nil && try < 2:
			// Another worker inserted or changed these rows after the statement's snapshot: running
			// the statement again sees them.
			sub := make([]int, len(again))
			for i, k := range again {
				sub[i] = pos[k]
			}
			pos = sub
			continue
		case err == nil:
			for _, k := range again {
				out[pos[k]].Err = errors.New("claim turn: row changed under three consecutive claims")
			}
			return
		case retryable(err) && try < 2:
			continue
		case isDataError(err) && len(pos) > 1:
			for _, p := range pos {
				s.claimRound(ctx, encoded, []int{p}, out)
			}
			return
		case isDataError(err) && encoded[pos[0]].asIs != nil:
			// Postgres refused the record's own metadata bytes where the map would pass (a number
			// out of numeric's range that encoding/json reads as 0, say): store the map encoded.
			r := &encoded[pos[0]]
			md, merr := json.Marshal(r.asIs)
			if merr != nil {
				out[pos[0]].Err = fmt.Errorf("encode turn metadata: %w", merr)
				return
			}
			r.metadata, r.asIs = md, nil
			continue
		default:
			err = fmt.Errorf("claim turns: %w", err)
			for _, p := range pos {
				out[p].Err = err
			}
			return
		}
	}
}

// readClaims reads claimManySQL's rows for the requests at positions pos (whose turn IDs are ids,
// all distinct) into out, and returns the indexes into pos of the requests to send again: those the
// statement neither took nor found, or found claimable and did not take.
//
// The outcome and status are read as the driver's bytes and mapped to their constants (textConst),
// and the claims are kept by value: a string per text column, and the scan's targets on the heap,
// were five allocations a turn.
func readClaims(rows pgx.Rows, pos []int, ids pgarray.UUIDs, out []batch.Result[Claim]) ([]int, error) {
	defer rows.Close()
	at := make(map[pgarray.UUID]int, len(ids))
	for i, id := range ids {
		at[id] = i
	}
	// A claimed row and a prev row may both come back for one turn (the row as it was before this
	// statement took it over): the claim wins.
	got := make([]Claim, len(ids))
	found := make([]bool, len(ids))
	// Declared once: Scan's arguments escape, so each declared in the loop would be allocated per
	// row. Scan sets every field of c but the two set after it.
	var id [16]byte
	var outcome, status pgtype.DriverBytes
	var c Claim
	for rows.Next() {
		if err := rows.Scan(&id, &outcome, &c.Attempt, &c.Token, &status, &c.LeaseExpiresAt, &c.SessionSeq); err != nil {
			return nil, err
		}
		i, ok := at[pgarray.UUID(id)]
		if !ok {
			return nil, fmt.Errorf("claim returned turn %s, which was not asked for", uuid.UUID(id))
		}
		if outcome == nil || (found[i] && got[i].Outcome == Acquired) {
			// outcome NULL: the row as it was was claimable, so unless it was claimed it changed
			// under the statement.
			continue
		}
		c.Outcome, c.Status = textConst(outcome, outcomes), textConst(status, statuses)
		got[i], found[i] = c, true
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var again []int
	for i := range got {
		if !found[i] {
			again = append(again, i)
			continue
		}
		out[pos[i]] = batch.Result[Claim]{Val: got[i]}
	}
	return again, nil
}

// The values readClaims maps the statement's text columns to.
var (
	outcomes = []Outcome{Acquired, Done, Leased, Cancelled, Exhausted}
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

// claimRow is one claim request as the statement takes it.
type claimRow struct {
	id              uuid.UUID
	session, tenant string
	input           string // the input's text
	metadata        []byte
	// asIs is the metadata map while metadata holds the record's own bytes (storableAsIs), to be
	// encoded instead should Postgres refuse them.
	asIs               map[string]any
	accepted, deadline time.Time
	partition          int32
	offset             int64
}

// encodeClaim lays out req as the claim statement takes it. The input goes as its text, and the
// statement builds the stored object from it (as the completion builds the output, and see
// wire.Input): encoding it as JSON here and handing pgx a [][]byte for a jsonb[] argument, whose
// every element pgx copies to the heap, cost three allocations a turn. The text needs no checking:
// a decoded envelope's strings are valid UTF-8, and a NUL, which Postgres refuses in text, it
// refused as \u0000 in jsonb too.
func encodeClaim(req ClaimRequest) (claimRow, error) {
	e := req.Env
	var md []byte
	var asIs map[string]any
	switch {
	case e.Metadata == nil:
	case storableAsIs(req.RawMetadata):
		md, asIs = req.RawMetadata, e.Metadata
	default:
		var err error
		if md, err = json.Marshal(e.Metadata); err != nil {
			return claimRow{}, fmt.Errorf("encode turn metadata: %w", err)
		}
	}
	tenant := e.Tenant
	if tenant == "" {
		tenant = "default"
	}
	return claimRow{
		id: e.TurnID, session: e.SessionID, tenant: tenant, input: e.Input.Text, metadata: md, asIs: asIs,
		accepted: e.AcceptedAt, deadline: e.Deadline, partition: req.Partition, offset: req.Offset,
	}, nil
}

// storableAsIs reports whether raw, a JSON object, can go into a jsonb column as it is and mean
// there what its decoded map, encoded again, would: valid UTF-8 with no \u escape. encoding/json
// decodes invalid UTF-8 and an unpaired surrogate escape to U+FFFD, where Postgres refuses both,
// so such bytes would fail a claim the encoded map passes (\u0000 fails either way). Otherwise
// jsonb keeps what the map keeps: the last of duplicate keys, and numbers as written (where the
// map's float64 would round a long integer). Bytes Postgres refuses all the same are claimed again
// with the map encoded (claimRound).
func storableAsIs(raw json.RawMessage) bool {
	return len(raw) > 0 && utf8.Valid(raw) && !bytes.Contains(raw, []byte(`\u`))
}

// turnIDArg is a turn ID as a statement's array element: sent in binary, where a uuid.UUID goes
// through its driver.Valuer, its text form (3% of a busy worker's CPU).
func turnIDArg(id uuid.UUID) pgarray.UUID { return pgarray.UUID(id) }

// claimArgs holds claim rows as the statement's column arrays.
type claimArgs struct {
	ids                 pgarray.UUIDs // see turnIDArg
	sessions, tenants   pgarray.Texts
	inputs              pgarray.Texts // the input's text: the statement builds the object (encodeClaim)
	metadata            [][]byte
	accepted, deadlines pgarray.Times
	parts               pgarray.Ints
	offsets             pgarray.Ints
}

// claimArgsOf returns the column arrays of the rows at positions pos.
func claimArgsOf(rows []claimRow, pos []int) claimArgs {
	n := len(pos)
	a := claimArgs{
		ids: make(pgarray.UUIDs, n), sessions: make(pgarray.Texts, n), tenants: make(pgarray.Texts, n),
		inputs: make(pgarray.Texts, n), metadata: make([][]byte, n), accepted: make(pgarray.Times, n),
		deadlines: make(pgarray.Times, n), parts: make(pgarray.Ints, n), offsets: make(pgarray.Ints, n),
	}
	for i, p := range pos {
		r := rows[p]
		a.ids[i], a.sessions[i], a.tenants[i] = turnIDArg(r.id), pgarray.Text(r.session), pgarray.Text(r.tenant)
		a.inputs[i], a.metadata[i] = pgarray.Text(r.input), r.metadata
		a.accepted[i], a.deadlines[i] = pgarray.Time(r.accepted), pgarray.Time(r.deadline)
		a.parts[i], a.offsets[i] = pgarray.Int(r.partition), pgarray.Int(r.offset)
	}
	return a
}

// rounds splits the positions idx into rounds in which no key appears twice, keeping each key's
// positions in order: a statement may touch a row only once, and two requests for one turn must
// see each other's effect, as two separate calls would.
func rounds(idx []int, key func(int) uuid.UUID) [][]int {
	seen := make(map[uuid.UUID]int, len(idx))
	var out [][]int
	for _, i := range idx {
		k := key(i)
		r := seen[k]
		seen[k] = r + 1
		if r == len(out) {
			out = append(out, nil)
		}
		out[r] = append(out[r], i)
	}
	return out
}

// retryable reports whether a whole statement may simply run again: a deadlock or serialization
// failure aborted it, so it changed nothing.
func retryable(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && (pg.Code == "40P01" || pg.Code == "40001")
}

// isDataError reports whether Postgres refused the statement because of the data it carried
// (class 22: data exception, class 23: integrity constraint violation), as opposed to the
// connection or the server failing.
func isDataError(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && (strings.HasPrefix(pg.Code, "22") || strings.HasPrefix(pg.Code, "23"))
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

// The statements that change many turns lock them through lockedTurns: a lateral probe by primary
// key per request, the requests taken in turn_id order. The probes run in that order, so their row
// locks are taken in turn_id order whatever the rest of the plan (an UPDATE … FROM otherwise takes
// its locks in the order its join emits rows: the order of the requests, or of whichever index it
// scans). The renewal and a completion batch of one worker share rows; taken in different orders
// they deadlocked, and Postgres breaks a deadlock only after deadlock_timeout (1s by default),
// stalling every turn of both statements meanwhile.
//
// A lateral probe is also a plan that does not depend on statistics. Joined to the requests as a
// plain table, turns was planned from stale statistics as a scan of the whole table, or of the
// partial index of running turns (every turn in flight and every dead entry, for every request),
// under a nested loop that read the requests' arrays again for every row: a batch's cost grew with
// the table, with the turns in flight and with the square of the batch (TestStatementsProbeByKey).
// The status condition is checked above the probe, and OFFSET 0 keeps Postgres from pushing it down
// into the probe, where it would make the partial index of running turns a candidate again.
//
// lockedTurns is the body of a CTE: req must have columns turn_id and token; it yields req's
// columns (r.*) and the locked row's (l.*) for the requests whose token is still the running turn's.
const lockedTurns = `
    SELECT r.*, l.* FROM (SELECT * FROM req ORDER BY turn_id) r
    CROSS JOIN LATERAL (
        SELECT t.fencing_token AS held_token, t.status AS held_status, t.session_id, t.tenant,
            t.input->>'text' AS question
        FROM turns t WHERE t.turn_id = r.turn_id OFFSET 0 FOR UPDATE
    ) l
    WHERE l.held_token = r.token AND l.held_status = 'running'`

// renewSQL extends the leases still held, locking them in turn_id order (see lockedTurns).
// lease_owner is checked after the lock: a renewal that raced a release must not extend it.
const renewSQL = `
WITH req AS MATERIALIZED (
    SELECT * FROM unnest($1::uuid[], $2::bigint[]) AS r(turn_id, token)
), held AS MATERIALIZED (` + lockedTurns + `
)
UPDATE turns t SET lease_expires_at = now() + $3 * interval '1 millisecond', updated_at = now()
FROM held h WHERE t.turn_id = h.turn_id AND t.lease_owner IS NOT NULL
RETURNING t.turn_id, t.cancel_requested`

// Renew extends every given lease in one statement and returns those still held, with their cancel
// flags. A lease missing from the result is lost: fenced by a newer attempt, the turn ended, or the
// lease was released (a renewal round that raced a release must not extend the released lease, or
// the turn it handed off would wait a full TTL for its next owner; Release clears lease_owner).
func (s *Store) Renew(ctx context.Context, held []Held) ([]Renewal, error) {
	if len(held) == 0 {
		return nil, nil
	}
	ids := make(pgarray.UUIDs, len(held))
	tokens := make(pgarray.Ints, len(held))
	for i, h := range held {
		ids[i], tokens[i] = turnIDArg(h.TurnID), pgarray.Int(h.Token)
	}
	rows, err := s.pool.Query(ctx, renewSQL, ids, tokens, s.ttl.Milliseconds())
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

// Complete marks the turn succeeded with output and appends its messages to the session history,
// conditional on the token (ErrFenced otherwise). It is CompleteMany of one completion.
func (s *Store) Complete(ctx context.Context, turnID uuid.UUID, token int64, output wire.Output) error {
	return s.CompleteMany(ctx, []Completion{{TurnID: turnID, Token: token, Output: output}})[0].Err
}

// Completion is one turn's completion for CompleteMany.
type Completion struct {
	TurnID uuid.UUID
	Token  int64
	Output wire.Output
}

// completeManySQL marks many turns succeeded and appends each one's user and assistant messages to
// its session history (one session_history row holding both) in one statement, each row
// conditional on its own token. Turns are locked in turn_id order (lockedTurns) and sessions
// bumped in session_id order, so it cannot deadlock with another batch or with the renewal; should
// one batch complete several turns of one session, their messages are numbered in request order.
// The result names the 1-based positions of the requests that completed, with the sequence number
// of their assistant message; the others were fenced.
//
// Each turn's messages are numbered from its session's new last_seq, which only the upsert's
// RETURNING knows. Joining those rows back to the turns was planned, from the CTEs' estimates of a
// row or two, as a nested loop (the square of the batch); the statement instead folds them into one
// jsonb object keyed by session and looks each turn's session up in it, whatever the plan.
const completeManySQL = `
WITH req AS MATERIALIZED (
    SELECT * FROM unnest($1::uuid[], $2::bigint[], $3::text[]) WITH ORDINALITY
        AS r(turn_id, token, answer, ord)
), done AS MATERIALIZED (` + lockedTurns + `
), updated AS (
    UPDATE turns t SET status = 'succeeded', output = jsonb_build_object('text', d.answer), error = NULL, finished_at = now(),
        lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
    FROM done d WHERE t.turn_id = d.turn_id
), seq AS (
    INSERT INTO sessions AS s (session_id, tenant, last_seq)
    SELECT session_id, min(tenant), 2 * count(*) FROM done GROUP BY session_id ORDER BY session_id
    ON CONFLICT (session_id) DO UPDATE SET last_seq = s.last_seq + EXCLUDED.last_seq, updated_at = now()
    RETURNING s.session_id, s.last_seq
), last AS MATERIALIZED (
    SELECT jsonb_object_agg(session_id, last_seq) AS by_session FROM seq
), ranked AS (
    -- later: how many of the session's turns in this batch come after this one.
    SELECT session_id, turn_id, ord, question, answer, count(*) OVER w - row_number() OVER w AS later
    FROM done
    WINDOW w AS (PARTITION BY session_id ORDER BY ord ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
), numbered AS (
    SELECT r.*, ((SELECT by_session FROM last)->>r.session_id)::bigint - 2 * r.later AS top FROM ranked r
), msgs AS (
    INSERT INTO session_history (session_id, seq, turn_id, question, answer)
    SELECT session_id, top, turn_id, coalesce(question, ''), answer FROM numbered
)
SELECT ord, top FROM numbered`

// CompleteMany completes every given turn in one statement, each exactly as Complete would, and
// returns one result per completion in order: the session history's sequence number after the
// turn's two messages (its assistant message's), ErrFenced, or the statement's error, which fails
// every completion of the batch (none of them happened).
func (s *Store) CompleteMany(ctx context.Context, cs []Completion) []batch.Result[int64] {
	out := make([]batch.Result[int64], len(cs))
	idx := make([]int, 0, len(cs))
	for i := range cs {
		idx = append(idx, i)
	}
	for _, round := range rounds(idx, func(i int) uuid.UUID { return cs[i].TurnID }) {
		s.completeRound(ctx, cs, round, out)
	}
	return out
}

// completeRound completes the turns at positions pos of cs (distinct turns) and writes their
// results to out. Only an output's text is sent: the statement builds the stored output object
// from it (see wire.Output), where encoding each output as JSON and handing pgx a [][]byte for the
// jsonb[] argument (whose every element it copies to the heap) cost four allocations a turn.
func (s *Store) completeRound(ctx context.Context, cs []Completion, pos []int, out []batch.Result[int64]) {
	ids := make(pgarray.UUIDs, 0, len(pos))
	tokens := make(pgarray.Ints, 0, len(pos))
	texts := make(pgarray.Texts, 0, len(pos))
	for _, p := range pos {
		ids, tokens = append(ids, turnIDArg(cs[p].TurnID)), append(tokens, pgarray.Int(cs[p].Token))
		texts = append(texts, pgarray.Text(cs[p].Output.Text))
	}
	for try := 0; ; try++ {
		seqs, err := s.completeRows(ctx, ids, tokens, texts)
		switch {
		case err == nil:
			for k, p := range pos {
				if seqs[k] == 0 {
					out[p].Err = ErrFenced
				} else {
					out[p].Val = seqs[k]
				}
			}
			return
		case retryable(err) && try < 2:
			continue
		default:
			err = fmt.Errorf("complete turns: %w", err)
			for _, p := range pos {
				out[p].Err = err
			}
			return
		}
	}
}

// completeRows runs completeManySQL and returns, per row, its assistant message's sequence number,
// or 0 if it was fenced.
func (s *Store) completeRows(ctx context.Context, ids pgarray.UUIDs, tokens pgarray.Ints, answers pgarray.Texts) ([]int64, error) {
	rs, err := s.pool.Query(ctx, completeManySQL, ids, tokens, answers)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	seqs := make([]int64, len(ids))
	// Declared once: Scan's arguments escape, so declared in the loop they were two allocations a
	// row.
	var ord int
	var seq int64
	for rs.Next() {
		if err := rs.Scan(&ord, &seq); err != nil {
			return nil, err
		}
		seqs[ord-1] = seq
	}
	return seqs, rs.Err()
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

// Final is the outcome of a finished turn, for re-publishing its terminal event after a crash.
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

// History returns a session's messages, oldest first: each succeeded turn's question and answer
// (agent.TurnMessages of its session_history row). It is the uncached read; the worker's history
// cache (package history) reads the same rows incrementally.
func (s *Store) History(ctx context.Context, sessionID string) ([]agent.Message, error) {
	rows, err := s.pool.Query(ctx, `SELECT seq, turn_id::text, question, answer FROM session_history
		WHERE session_id = $1 ORDER BY seq`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("read session history: %w", err)
	}
	defer rows.Close()
	var out []agent.Message
	for rows.Next() {
		var (
			seq                      int64
			turnID, question, answer string
		)
		if err := rows.Scan(&seq, &turnID, &question, &answer); err != nil {
			return nil, fmt.Errorf("read session history: %w", err)
		}
		msgs := agent.TurnMessages(seq, turnID, question, answer)
		out = append(out, msgs[:]...)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read session history: %w", err)
	}
	return out, nil
}

// expireSQL ends a turn that must not start because its deadline is too near: it is recorded
// expired without ever being claimed (no attempt, no start time). A turn leased by a live worker,
// already finished, or cancelled is left alone; the caller's claim then reports which.
const expireSQL = `
INSERT INTO turns AS t (turn_id, session_id, tenant, status, fencing_token, input, metadata, accepted_at,
    deadline, finished_at, error, kafka_partition, kafka_offset)
VALUES ($1, $2, $3, 'expired', nextval('fencing_token_seq'), jsonb_build_object('text', $4::text), $5, $6, $7, now(), $8, $9, $10)
ON CONFLICT (turn_id) DO UPDATE SET status = 'expired', error = EXCLUDED.error, finished_at = now(),
    fencing_token = nextval('fencing_token_seq'), lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
WHERE NOT t.cancel_requested
  AND (t.status = 'queued' OR (t.status = 'running' AND t.lease_expires_at < now()))
RETURNING t.fencing_token, t.attempt`

// Expire records the turn as expired unless someone holds it or it ended, and returns the fresh token
// its turn.expired event is published with. ErrFenced means it was left alone.
func (s *Store) Expire(ctx context.Context, req ClaimRequest, msg string) (token int64, attempt int, err error) {
	r, err := encodeClaim(req)
	if err != nil {
		return 0, 0, err
	}
	err = s.pool.QueryRow(ctx, expireSQL, r.id, r.session, r.tenant, r.input, r.metadata, r.accepted, r.deadline,
		msg, r.partition, r.offset).Scan(&token, &attempt)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, ErrFenced
	}
	if err != nil {
		return 0, 0, fmt.Errorf("expire turn: %w", err)
	}
	return token, attempt, nil
}
