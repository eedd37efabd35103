package turnstore

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/turnstile-run/turnstile/pkg/wire"
)

// HistoryEntry is one succeeded turn of a session's history: its question and answer, the user and
// assistant messages numbered Seq-1 and Seq.
type HistoryEntry struct {
	Seq      int64
	TurnID   string
	Question string
	Answer   string
}

// ReadHistory returns a session's whole history, oldest first.
func (s *Store) ReadHistory(ctx context.Context, session wire.SessionKey) ([]HistoryEntry, error) {
	rows, err := s.pool.Query(ctx, `SELECT seq, turn_id::text, question, answer FROM session_history
		WHERE session_id = $1 ORDER BY seq`, session)
	if err != nil {
		return nil, fmt.Errorf("read session history: %w", err)
	}
	defer rows.Close()
	var out []HistoryEntry
	for rows.Next() {
		var e HistoryEntry
		if err := rows.Scan(&e.Seq, &e.TurnID, &e.Question, &e.Answer); err != nil {
			return nil, fmt.Errorf("read session history: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read session history: %w", err)
	}
	return out, nil
}

// historyAfterSQL reads, in one round trip, the session's last_seq, the first sequence number of
// its history (its primary key's first entry) and the entries numbered after $2: a row per entry, or one row with NULL entry columns when there is none, and no row for a
// session without a sessions row (no history). An entry holds one turn's question (seq - 1) and
// answer (seq), so a history read up to an answer reads every entry either wholly or not at all.
//
//go:embed history_after.sql
var historyAfterSQL string

// ReadHistoryAfter returns the session history's last sequence number (sessions.last_seq, 0 for a
// session without history), the sequence number of its first entry (0 for none) and its entries
// numbered after after, oldest first. A last sequence number equal to after means nothing was
// appended since; one below it means the session was deleted and recreated; a first entry other
// than the one read before means the history was rewritten (RewriteHistory), which appends never
// do.
func (s *Store) ReadHistoryAfter(ctx context.Context, session wire.SessionKey, after int64) (lastSeq, firstSeq int64, entries []HistoryEntry, err error) {
	rows, err := s.pool.Query(ctx, historyAfterSQL, session, after)
	if err != nil {
		return 0, 0, nil, fmt.Errorf("read session history: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var seq, first *int64
		var turnID, question, answer *string
		if err := rows.Scan(&lastSeq, &first, &seq, &turnID, &question, &answer); err != nil {
			return 0, 0, nil, fmt.Errorf("read session history: %w", err)
		}
		if first != nil {
			firstSeq = *first
		}
		if seq != nil {
			entries = append(entries, HistoryEntry{Seq: *seq, TurnID: *turnID, Question: *question, Answer: *answer})
		}
	}
	if err := rows.Err(); err != nil {
		return 0, 0, nil, fmt.Errorf("read session history: %w", err)
	}
	return lastSeq, firstSeq, entries, nil
}
