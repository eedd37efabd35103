package turnstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/turnstile-run/turnstile/pkg/wire"
)

// HistoryPair is one question and its answer of a rewritten session history.
type HistoryPair struct {
	Question string
	Answer   string
}

// RewriteHistory replaces a session's whole history with pairs (a LangGraph thread's state edited
// or copied): what the session's next turn's agent sees. The new entries are numbered after the
// session's last_seq (never reusing a number), each under a turn ID of its own, and last_seq moves
// past them, in one transaction holding the sessions row, so it serializes with every completion
// of the session. A worker's history cache sees the history's first sequence number change and
// reads it again whole (ReadHistoryAfter). The caller makes sure no turn of the session is running:
// one that is sees the history it claimed with.
func (s *Store) RewriteHistory(ctx context.Context, tenant string, session wire.SessionKey, pairs []HistoryPair) (lastSeq int64, err error) {
	questions := make([]string, len(pairs))
	answers := make([]string, len(pairs))
	for i, p := range pairs {
		questions[i], answers[i] = p.Question, p.Answer
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO sessions (session_id, tenant) VALUES ($1, $2) ON CONFLICT (session_id) DO NOTHING`, session, tenant); err != nil {
			return err
		}
		var last int64
		if err := tx.QueryRow(ctx, `SELECT last_seq FROM sessions WHERE session_id = $1 FOR UPDATE`, session).Scan(&last); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM session_history WHERE session_id = $1`, session); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO session_history (session_id, seq, turn_id, question, answer)
			SELECT $1, $2::bigint + 2 * x.ord, gen_random_uuid(), x.q, x.a
			FROM unnest($3::text[], $4::text[]) WITH ORDINALITY AS x (q, a, ord)`, session, last, questions, answers); err != nil {
			return err
		}
		lastSeq = last + 2*int64(max(len(pairs), 1))
		_, err := tx.Exec(ctx, `UPDATE sessions SET last_seq = $2, updated_at = now() WHERE session_id = $1`, session, lastSeq)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("rewrite session history: %w", err)
	}
	return lastSeq, nil
}
