package gen

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/turnstile-run/turnstile/pkg/demo"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

type issues struct {
	intake []time.Duration

	lostEvents, repeated, reordered, wrong, unknown, failed int
	streamErrors, reconnects, resets, badEvents, retries    int
	examples                                                []string
}

func (is *issues) note(format string, args ...any) {
	if len(is.examples) < 20 {
		is.examples = append(is.examples, fmt.Sprintf(format, args...))
	}
}

// Correctness is what the run found wrong; every counter must be zero for a correct run.
type Correctness struct {
	// LostTurns: accepted turns without a terminal event on their stream.
	LostTurns int `json:"lost_turns"`
	// LostEvents: deltas skipped or a turn completed before all its predicted deltas.
	LostEvents int `json:"lost_events"`
	// Repeated: events after a turn's terminal event, deltas or starts seen twice.
	Repeated int `json:"repeated"`
	// Reordered: a turn started while another of its session was running, or a delta of another
	// attempt, or the stream's order of a session's turns disagreeing with Kafka's.
	Reordered int `json:"reordered"`
	// WrongContent: deltas or outputs other than the demo agent's prediction.
	WrongContent int `json:"wrong_content"`
	// NotSucceeded: turns that ended failed, cancelled or expired.
	NotSucceeded int `json:"not_succeeded"`
	// UnknownTurns: events for turns this run never posted.
	UnknownTurns int `json:"unknown_turns"`
	// BadEvents: undecodable data or unknown event types.
	BadEvents int `json:"bad_events"`
	// StreamResets: stream.reset events (history lost under the reader).
	StreamResets int `json:"stream_resets"`

	Postgres PostgresCheck `json:"postgres"`

	// Informational, not failures.
	StreamErrors int `json:"stream_errors"`
	Reconnects   int `json:"reconnects"`
	Retries      int `json:"retries"`

	Examples []string `json:"examples,omitempty"`
}

// PostgresCheck is the cross-check of the run against the turns table and the session history (read
// as messages through the session_messages view).
type PostgresCheck struct {
	Checked bool `json:"checked"`
	// Missing: accepted turns with no row.
	Missing int `json:"missing"`
	// NotSucceeded: rows of accepted turns whose status is not succeeded.
	NotSucceeded int `json:"not_succeeded"`
	// WrongOutput: rows whose output differs from the prediction.
	WrongOutput int `json:"wrong_output"`
	// HistoryWrong: turns without exactly one user and one assistant message with the right content.
	HistoryWrong int `json:"history_wrong"`
	// OrderWrong: sessions whose history order and stream order disagree, or where a turn posted
	// after another's answer came back runs, or sits in Kafka, before it.
	OrderWrong int `json:"order_wrong"`
	// Unexpected: rows for turns the run did not see accepted (a 202 lost to a timeout, or a 503
	// from intake's produce wait running out while the record was written after all).
	Unexpected int `json:"unexpected"`
}

// OK reports whether nothing was lost, repeated, reordered or wrong.
func (c Correctness) OK() bool {
	p := c.Postgres
	return c.LostTurns+c.LostEvents+c.Repeated+c.Reordered+c.WrongContent+c.NotSucceeded+c.UnknownTurns+
		c.BadEvents+c.StreamResets+p.Missing+p.NotSucceeded+p.WrongOutput+p.HistoryWrong+p.OrderWrong == 0
}

func (g *Generator) correctnessLocked() Correctness {
	is := &g.issues
	c := Correctness{
		LostEvents: is.lostEvents, Repeated: is.repeated, Reordered: is.reordered,
		WrongContent: is.wrong, NotSucceeded: is.failed, UnknownTurns: is.unknown, BadEvents: is.badEvents,
		StreamResets: is.resets, StreamErrors: is.streamErrors, Reconnects: is.reconnects, Retries: is.retries,
	}
	for _, t := range g.turns {
		if t.accepted && t.terminals == 0 {
			c.LostTurns++
			is.note("turn %s of session %s: accepted, no terminal event", t.id, t.sess.id)
		}
	}
	return c
}

type pgTurn struct {
	status    string
	partition int32
	offset    int64
	output    string
	user      int
	assistant int
	userOK    bool
	asstOK    bool
	firstSeq  int64
}

// checkPostgres compares the run with the database; it runs after the streams are closed.
func (g *Generator) checkPostgres(ctx context.Context, pool *pgxpool.Pool, c *Correctness) error {
	// The generator posts without an API key, so its sessions are the default tenant's, stored
	// under their keys (wire.SessionKey).
	prefix := wire.NewSessionKey(wire.DefaultTenant, g.SessionPrefix()).String()
	// The generator mints its turn IDs, which the stores hold under a key of the tenant's
	// (wire.ClientTurnKey) with the minted ID beside it: shown maps the stored ID to the minted one.
	rows, err := pool.Query(ctx, `SELECT turn_id::text, coalesce(client_turn_id, turn_id)::text, status,
		coalesce(kafka_partition, -1), coalesce(kafka_offset, -1), coalesce(output->>'text', '')
		FROM turns WHERE session_id LIKE $1 || '%'`, prefix)
	if err != nil {
		return fmt.Errorf("read turns: %w", err)
	}
	byID := map[string]*pgTurn{}
	shown := map[string]string{}
	for rows.Next() {
		var stored, id string
		p := &pgTurn{firstSeq: -1}
		if err := rows.Scan(&stored, &id, &p.status, &p.partition, &p.offset, &p.output); err != nil {
			rows.Close()
			return fmt.Errorf("scan turn: %w", err)
		}
		byID[id] = p
		shown[stored] = id
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read turns: %w", err)
	}
	msgs, err := pool.Query(ctx, `SELECT session_id, seq, turn_id::text, role, content FROM session_messages
		WHERE session_id LIKE $1 || '%' ORDER BY session_id, seq`, prefix)
	if err != nil {
		return fmt.Errorf("read session history: %w", err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for msgs.Next() {
		var sid, tid, role, content string
		var seq int64
		if err := msgs.Scan(&sid, &seq, &tid, &role, &content); err != nil {
			msgs.Close()
			return fmt.Errorf("scan message: %w", err)
		}
		if id, ok := shown[tid]; ok {
			tid = id
		}
		p := byID[tid]
		t := g.turns[tid]
		if p == nil || t == nil {
			c.Postgres.HistoryWrong++
			g.issues.note("history of %s holds a message of unknown turn %s", sid, tid)
			continue
		}
		if p.firstSeq < 0 {
			p.firstSeq = seq
		}
		switch role {
		case "user":
			p.user++
			p.userOK = content == t.text
		case "assistant":
			p.assistant++
			p.asstOK = content == demo.Output(t.text, g.cfg.Knobs)
		}
	}
	msgs.Close()
	if err := msgs.Err(); err != nil {
		return fmt.Errorf("read session history: %w", err)
	}
	c.Postgres.Checked = true
	for id, t := range g.turns {
		p := byID[id]
		switch {
		case !t.accepted && p != nil:
			c.Postgres.Unexpected++
		case !t.accepted:
		case p == nil:
			c.Postgres.Missing++
			g.issues.note("turn %s: accepted, no row in turns", id)
		case p.status != "succeeded":
			c.Postgres.NotSucceeded++
			g.issues.note("turn %s: status %s", id, p.status)
		default:
			if p.output != demo.Output(t.text, g.cfg.Knobs) {
				c.Postgres.WrongOutput++
			}
			if p.user != 1 || p.assistant != 1 || !p.userOK || !p.asstOK {
				c.Postgres.HistoryWrong++
				g.issues.note("turn %s: history has %d user and %d assistant messages", id, p.user, p.assistant)
			}
		}
	}
	// One session's turns: the order the history recorded them in and the order the stream started
	// them in agree, and a turn posted after another's answer came back follows it there and in
	// Kafka (its partition is the session's). Two posts of a session in flight at once have no
	// order between them: either may reach Kafka, and be claimed, first. Every turn the database
	// holds takes part, accepted or not: a 503 after the produce wait timed out may still have
	// queued its turn (intake says so, and a client would retry with the same key), and that turn
	// then runs and shows on the stream in its place.
	for _, s := range g.sessions {
		var acc []*turn
		for _, t := range s.turns {
			if byID[t.id] != nil {
				acc = append(acc, t)
			}
		}
		bySeq := append([]*turn(nil), acc...)
		sort.Slice(bySeq, func(i, j int) bool { return byID[bySeq[i].id].firstSeq < byID[bySeq[j].id].firstSeq })
		ok := len(s.order) == len(acc)
		for i, t := range bySeq {
			if ok && s.order[i] != t {
				ok = false
			}
			if t.answered.IsZero() {
				continue
			}
			for _, u := range acc {
				if !t.answered.Before(u.sentAt) {
					continue
				}
				// u was posted after t's answer came back: it must follow t in the history and in Kafka.
				pu, pt := byID[u.id], byID[t.id]
				if pu.firstSeq < pt.firstSeq || (pu.offset >= 0 && pt.offset >= 0 && pu.offset < pt.offset) {
					ok = false
				}
			}
		}
		if !ok {
			c.Postgres.OrderWrong++
			g.issues.note("session %s: stream, history and Kafka disagree on turn order", s.id)
		}
	}
	return nil
}
