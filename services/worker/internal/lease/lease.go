package lease

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/turnstile-run/turnstile/pkg/pgarray"
	"github.com/turnstile-run/turnstile/pkg/turnstore"
	"github.com/turnstile-run/turnstile/pkg/wire"
	"github.com/turnstile-run/turnstile/services/worker/internal/batch"
)

// statementTries is how many times a claim or completion statement runs before its error (or a
// row that keeps changing under it) is the caller's: a deadlock or serialization failure changed
// nothing and usually clears on the next run.
const statementTries = 3

// Claim is the result of Store.Claim.
type Claim struct {
	Outcome turnstore.ClaimOutcome
	Attempt int
	Token   wire.FenceToken
	// Status is the row's status when the outcome is turnstore.ClaimDone.
	Status wire.Status
	// LeaseExpiresAt is when the current holder's lease ends (turnstore.ClaimLeased) or this worker's (turnstore.ClaimAcquired).
	LeaseExpiresAt time.Time
	// SessionSeq is the session history's last sequence number (sessions.last_seq, 0 for a session
	// without history) as the claim read it. A session's turns run one at a time, so the history
	// cannot grow between an acquiring claim and the attempt: a history cache holding this sequence
	// number is current without asking Postgres again.
	SessionSeq int64
	// ExpiredOwner and ExpiredToken name, on an acquired claim that took over a running turn whose
	// lease had expired, the lease's holder and its fencing token: the claim took the lease of an
	// attempt that stopped renewing it. Both are zero when the claim inserted the turn or took it
	// queued, or when the lease had been released (after a failed attempt, or on drain).
	ExpiredOwner string
	ExpiredToken wire.FenceToken
}

// Store runs the lease statements (package turnstore) as one worker: its owner name, lease
// duration and attempt limit.
type Store struct {
	db          *turnstore.Store
	owner       string
	ttl         time.Duration
	maxAttempts atomic.Int32
	agent       string
}

// NewStore returns a store that claims as owner with leases of ttl, allowing maxAttempts attempts.
func NewStore(pool *pgxpool.Pool, owner string, ttl time.Duration, maxAttempts int) *Store {
	s := &Store{db: turnstore.New(pool), owner: owner, ttl: ttl}
	s.SetMaxAttempts(maxAttempts)
	return s
}

// SetMaxAttempts changes the attempt limit of the claims from now on (an agents-file reload).
func (s *Store) SetMaxAttempts(n int) { s.maxAttempts.Store(int32(min(n, math.MaxInt32))) }

// ForAgent names the catalog agent whose turns the store claims (a worker lane's), for the queue
// pauses of that agent (turnstore.ClaimPaused); without it only tenant pauses apply. It returns s.
func (s *Store) ForAgent(name string) *Store {
	s.agent = name
	return s
}

// TTL is the lease duration.
func (s *Store) TTL() time.Duration { return s.ttl }

// ClaimRequest carries what the claim records about the turn from its envelope.
type ClaimRequest struct {
	Env wire.Envelope
	// RawMetadata is Env.Metadata as the record held it (wire.DecodeEnvelopeRaw), or nil: the claim
	// stores these bytes when Postgres takes them as they are (storableAsIs) instead of encoding
	// the map again.
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

// ClaimMany claims every request in one statement (turnstore.Store.ClaimTurns), each under Claim's
// rules, and returns one result per request in order. Requests for the same turn are claimed one
// after the other, as separate calls to Claim would. A statement error fails every request, except
// that a data error (one bad row) is isolated by claiming each request on its own, so one poison
// record cannot fail the claims of every turn batched with it.
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
// results to out. A request the statement neither took nor found, or found claimable and did not
// take (its row was inserted or changed by another worker after the statement's snapshot), is sent
// again: running the statement again sees the row.
func (s *Store) claimRound(ctx context.Context, encoded []claimRow, pos []int, out []batch.Result[Claim]) {
	for try := 0; ; try++ {
		p := s.claimParams(encoded, pos)
		rows, err := s.db.ClaimTurns(ctx, &p)
		var again []int
		if err == nil {
			again, err = matchClaims(rows, pos, p.TurnIDs, out)
		}
		switch {
		case err == nil && len(again) == 0:
			return
		case err == nil && try < statementTries-1:
			sub := make([]int, len(again))
			for i, k := range again {
				sub[i] = pos[k]
			}
			pos = sub
			continue
		case err == nil:
			for _, k := range again {
				out[pos[k]].Err = fmt.Errorf("claim turn: row changed under %d consecutive claims", statementTries)
			}
			return
		case retryable(err) && try < statementTries-1:
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
			for _, p := range pos {
				out[p] = batch.Result[Claim]{Err: err}
			}
			return
		}
	}
}

// matchClaims matches the claim statement's rows to the requests at positions pos (whose turn IDs
// are ids, all distinct), writes the result of each request it settles to out, and returns the
// indexes into pos of the requests to send again: those the statement neither took nor found, or
// found claimable and did not take. On an error it may have written some results, which the
// caller replaces.
func matchClaims(rows []turnstore.ClaimRow, pos []int, ids pgarray.UUIDs, out []batch.Result[Claim]) ([]int, error) {
	at := make(map[pgarray.UUID]int, len(ids))
	for i, id := range ids {
		at[id] = i
	}
	// A claimed row and a row as it was may both come back for one turn (the row as it was before
	// this statement took it over): the claim wins.
	found := make([]bool, len(ids))
	// expired holds, by request, the claimable row as it was when a lease held on it had expired
	// (a row with an owner), for the claim that took it over.
	var expired map[int]turnstore.ClaimRow
	for _, r := range rows {
		i, ok := at[pgarray.UUID(r.TurnID)]
		if !ok {
			return nil, fmt.Errorf("claim turns: claim returned turn %s, which was not asked for", r.TurnID)
		}
		if r.Outcome == "" && r.LeaseOwner != "" {
			if expired == nil {
				expired = map[int]turnstore.ClaimRow{}
			}
			expired[i] = r
		}
		if r.Outcome == "" || (found[i] && out[pos[i]].Val.Outcome == turnstore.ClaimAcquired) {
			// No outcome: the row as it was was claimable, so unless it was claimed it changed
			// under the statement.
			continue
		}
		if found[i] && (r.Outcome == turnstore.ClaimBlocked || r.Outcome == turnstore.ClaimPaused) {
			// What the row as it was says (ended, leased, cancelled, exhausted) comes first: such
			// a turn is not waiting for its session's order.
			continue
		}
		out[pos[i]] = batch.Result[Claim]{Val: Claim{
			Outcome: r.Outcome, Attempt: r.Attempt, Token: r.Token, Status: r.Status,
			LeaseExpiresAt: r.LeaseExpiresAt, SessionSeq: r.SessionSeq,
		}}
		found[i] = true
	}
	for i, r := range expired {
		if c := &out[pos[i]].Val; found[i] && c.Outcome == turnstore.ClaimAcquired {
			c.ExpiredOwner, c.ExpiredToken = r.LeaseOwner, r.Token
		}
	}
	var again []int
	for i := range found {
		if !found[i] {
			again = append(again, i)
		}
	}
	return again, nil
}

// claimRow is one claim request as the statement takes it.
type claimRow struct {
	id       uuid.UUID
	session  wire.SessionKey
	tenant   string
	input    string // the input's text
	metadata []byte
	// asIs is the metadata map while metadata holds the record's own bytes (storableAsIs), to be
	// encoded instead should Postgres refuse them.
	asIs               map[string]any
	accepted, deadline time.Time
	partition          int32
	offset             int64
	// client is the ID the client minted (id is derived from it), or nil.
	client *uuid.UUID
	// The turn's notifications: its webhook and push configs (the envelope's), and the task its
	// metadata names (nil: its own).
	webhook  *wire.Webhook
	configs  []wire.PushConfig
	task     *uuid.UUID
	agent    string
	priority int
}

// encodeClaim lays out req as the claim statement takes it. The input goes as its text, and the
// statement builds the stored object from it (as the completion builds the output, and see
// wire.Input), so no JSON is encoded for it here and no jsonb[] argument, whose every element pgx
// copies to the heap, is sent. The text needs no checking: a decoded envelope's strings are valid
// UTF-8, and a NUL, which Postgres refuses in text, it refuses as \u0000 in jsonb too.
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
		id: e.TurnID, session: e.SessionKey(), tenant: tenant, input: e.Input.Text, metadata: md, asIs: asIs,
		accepted: e.AcceptedAt, deadline: e.Deadline, partition: req.Partition, offset: req.Offset,
		client: clientTurnID(e.ClientTurnID), webhook: e.Webhook, configs: e.PushConfigs, task: turnstore.TaskOf(e.Metadata),
		agent: e.Agent, priority: e.PriorityOf(),
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

// clientTurnID is a client-minted turn ID as the claim stores it: nil when there is none.
func clientTurnID(id uuid.UUID) *uuid.UUID {
	if id == uuid.Nil {
		return nil
	}
	return &id
}

// turnIDArg is a turn ID as a statement's array element: sent in binary, where a uuid.UUID goes
// through its driver.Valuer, its text form.
func turnIDArg(id uuid.UUID) pgarray.UUID { return pgarray.UUID(id) }

// claimParams returns the claim statement's parameters for the rows at positions pos, as this
// store claims.
func (s *Store) claimParams(rows []claimRow, pos []int) turnstore.ClaimParams {
	n := len(pos)
	p := turnstore.ClaimParams{
		TurnIDs: make(pgarray.UUIDs, n), SessionKeys: make(pgarray.Texts, n), Tenants: make(pgarray.Texts, n),
		Inputs: make(pgarray.Texts, n), Metadata: make([][]byte, n), AcceptedAt: make(pgarray.Times, n),
		Deadlines: make(pgarray.Times, n), Partitions: make(pgarray.Ints, n), Offsets: make(pgarray.Ints, n),
		Owner: s.owner, TTL: s.ttl, MaxAttempts: int(s.maxAttempts.Load()), ClientTurnIDs: make([]*uuid.UUID, n),
		Agents: make(pgarray.Texts, n), Agent: s.agent, Priorities: make(pgarray.Ints, n),
	}
	for i, k := range pos {
		r := rows[k]
		p.ClientTurnIDs[i] = r.client
		p.TurnIDs[i], p.SessionKeys[i], p.Tenants[i] = turnIDArg(r.id), pgarray.Text(r.session.String()), pgarray.Text(r.tenant)
		p.Inputs[i], p.Metadata[i] = pgarray.Text(r.input), r.metadata
		p.AcceptedAt[i], p.Deadlines[i] = pgarray.Time(r.accepted), pgarray.Time(r.deadline)
		p.Partitions[i], p.Offsets[i] = pgarray.Int(r.partition), pgarray.Int(r.offset)
		p.Notifications.Add(i, r.webhook, r.configs, r.task, n)
		p.Priorities[i] = pgarray.Int(r.priority)
		if r.agent != "" {
			p.Agents[i] = pgarray.Text(r.agent)
		}
	}
	return p
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
// (class 22: data exception, class 23: integrity constraint violation, class 54: a program limit
// such as the stack depth a deeply nested jsonb value exceeds), as opposed to the connection or
// the server failing.
func isDataError(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && (strings.HasPrefix(pg.Code, "22") || strings.HasPrefix(pg.Code, "23") ||
		strings.HasPrefix(pg.Code, "54"))
}

// Held names a lease this worker holds.
type Held struct {
	TurnID uuid.UUID
	Token  wire.FenceToken
}

// Renew extends every given lease in one statement and returns those still held, with their cancel
// flags. A lease missing from the result is lost: fenced by a newer attempt, the turn ended, or the
// lease was released (a renewal round that raced a release must not extend the released lease, or
// the turn it handed off would wait a full TTL for its next owner; turnstore.Store.ReleaseLease clears lease_owner).
func (s *Store) Renew(ctx context.Context, held []Held) ([]turnstore.Renewal, error) {
	if len(held) == 0 {
		return nil, nil
	}
	p := turnstore.RenewParams{TurnIDs: make(pgarray.UUIDs, len(held)), Tokens: make(pgarray.Ints, len(held)), TTL: s.ttl}
	for i, h := range held {
		p.TurnIDs[i], p.Tokens[i] = turnIDArg(h.TurnID), pgarray.Int(h.Token)
	}
	return s.db.RenewLeases(ctx, &p)
}

// Complete marks the turn succeeded with output and appends its messages to the session history,
// conditional on the token (turnstore.ErrFenced otherwise). It is CompleteMany of one completion.
func (s *Store) Complete(ctx context.Context, turnID uuid.UUID, token wire.FenceToken, output wire.Output) error {
	return s.CompleteMany(ctx, []Completion{{TurnID: turnID, Token: token, Output: output}})[0].Err
}

// Completion is one turn's completion for CompleteMany.
type Completion struct {
	TurnID uuid.UUID
	Token  wire.FenceToken
	Output wire.Output
	// End is what the completion records of the attempt in its row (turn_attempts).
	End turnstore.AttemptEnd
}

// CompleteMany completes every given turn in one statement (turnstore.Store.CompleteTurns), each
// exactly as Complete would, and returns one result per completion in order: the session history's
// sequence number after the turn's two messages (its assistant message's), turnstore.ErrFenced, or the
// statement's error, which fails every completion of the batch (none of them happened).
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
// results to out. Only an output's text, state and usage are sent: the statement builds the
// stored output object from them (see wire.Output).
func (s *Store) completeRound(ctx context.Context, cs []Completion, pos []int, out []batch.Result[int64]) {
	p := turnstore.CompleteParams{
		TurnIDs: make(pgarray.UUIDs, 0, len(pos)), Tokens: make(pgarray.Ints, 0, len(pos)),
		Answers: make(pgarray.Texts, 0, len(pos)), States: make(pgarray.Texts, 0, len(pos)),
		Usages: make(pgarray.Texts, 0, len(pos)), Upstreams: make(pgarray.Texts, 0, len(pos)),
		Events: make(pgarray.Ints, 0, len(pos)), Waits: make(pgarray.Ints, 0, len(pos)),
	}
	for _, k := range pos {
		p.TurnIDs, p.Tokens = append(p.TurnIDs, turnIDArg(cs[k].TurnID)), append(p.Tokens, pgarray.Int(cs[k].Token))
		p.Answers = append(p.Answers, pgarray.Text(cs[k].Output.Text))
		p.States = append(p.States, pgarray.Text(cs[k].Output.State))
		p.Usages = append(p.Usages, usageText(cs[k].Output.Usage))
		end := &cs[k].End
		p.Upstreams = append(p.Upstreams, pgarray.Text(end.Upstream))
		p.Events, p.Waits = append(p.Events, pgarray.Int(end.Events)), append(p.Waits, pgarray.Int(end.Waits))
	}
	for try := 0; ; try++ {
		seqs, err := s.db.CompleteTurns(ctx, &p)
		switch {
		case err == nil:
			for i, k := range pos {
				if seqs[i] == 0 {
					out[k].Err = turnstore.ErrFenced
				} else {
					out[k].Val = seqs[i]
				}
			}
			return
		case retryable(err) && try < statementTries-1:
			continue
		default:
			for _, k := range pos {
				out[k].Err = err
			}
			return
		}
	}
}

// usageText is a usage encoded for the completion statement, empty for none.
func usageText(u *wire.Usage) pgarray.Text {
	if u == nil {
		return ""
	}
	b, err := json.Marshal(u)
	if err != nil { // a struct of numbers and a string
		panic("lease: encode usage: " + err.Error())
	}
	return pgarray.Text(b)
}

// Expire records the turn as expired unless someone holds it or it ended, and returns the fresh token
// its turn.expired event is published with. turnstore.ErrFenced means it was left alone.
func (s *Store) Expire(ctx context.Context, req ClaimRequest, msg string) (token wire.FenceToken, attempt int, err error) {
	r, err := encodeClaim(req)
	if err != nil {
		return 0, 0, err
	}
	return s.db.ExpireTurn(ctx, &turnstore.ExpireParams{
		TurnID: r.id, Session: r.session, Tenant: r.tenant, Input: r.input, Metadata: r.metadata,
		AcceptedAt: r.accepted, Deadline: r.deadline, Partition: r.partition, Offset: r.offset, Error: msg,
		Webhook: r.webhook, PushConfigs: r.configs, Task: r.task,
	})
}
