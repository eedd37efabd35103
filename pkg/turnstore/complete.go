package turnstore

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/turnstile-run/turnstile/pkg/pgarray"
)

// CompleteParams are the turns one completion statement marks succeeded, as column arrays with one
// element per turn (every turn ID once), in the order their messages are numbered in.
type CompleteParams struct {
	TurnIDs pgarray.UUIDs
	// Tokens are the fencing tokens the completions hold.
	Tokens pgarray.Ints
	// Answers are the outputs' texts: the statement builds the stored output object from its text
	// (see wire.Output), where a jsonb[] argument would have pgx copy every element to the heap.
	Answers pgarray.Texts
	// States are the outputs' states (wire.Output.State), empty for most.
	States pgarray.Texts
	// Usages are the outputs' token usages (wire.Output.Usage) encoded as JSON objects, empty for
	// an output without one.
	Usages pgarray.Texts
	// Upstreams, Events and Waits end each turn's attempt row (AttemptEnd), in the same statement.
	Upstreams pgarray.Texts
	Events    pgarray.Ints
	Waits     pgarray.Ints
}

// args are completeSQL's arguments.
func (p *CompleteParams) args() []any {
	return []any{p.TurnIDs, p.Tokens, p.Answers, p.States, p.Usages, p.Upstreams, p.Events, p.Waits}
}

//go:embed complete.sql
var completeTemplate string

// completeSQL marks many turns succeeded and appends each one's user and assistant messages to its
// session history (one session_history row holding both) in one statement — data-modifying CTEs
// run in one implicit transaction, so a turn is marked done and its messages appended together or
// not at all — each row conditional on its own token. Turns are locked in turn_id order
// (lockedTurnsSQL) and sessions bumped in session_id order, so it cannot deadlock with another
// batch or with the renewal; should one batch complete several turns of one session, their
// messages are numbered in request order. The result names the 1-based positions of the requests
// that completed, with the sequence number of their assistant message; the others were fenced.
//
// Each turn's messages are numbered from its session's new last_seq, which only the upsert's
// RETURNING knows. Joined back to the turns, those rows are planned, from the CTEs' estimates of a
// row or two, as a nested loop (the square of the batch); the statement instead folds them into one
// jsonb object keyed by session and looks each turn's session up in it, whatever the plan.
var completeSQL = include(completeTemplate, "locked_turns.sql", lockedTurnsSQL)

// CompleteTurns runs the completion statement for the turns of p and returns, per turn in order,
// the session history's sequence number after its two messages (its assistant message's), or 0 if
// its token was stale (nothing changed for it). An error means no completion of p happened.
func (s *Store) CompleteTurns(ctx context.Context, p *CompleteParams) ([]int64, error) {
	rs, err := s.pool.Query(ctx, completeSQL, p.args()...)
	if err != nil {
		return nil, fmt.Errorf("complete turns: %w", err)
	}
	defer rs.Close()
	seqs := make([]int64, len(p.TurnIDs))
	// Declared once: Scan's arguments escape, so declared in the loop they would be allocated per
	// row.
	var ord int
	var seq int64
	for rs.Next() {
		if err := rs.Scan(&ord, &seq); err != nil {
			return nil, fmt.Errorf("complete turns: %w", err)
		}
		seqs[ord-1] = seq
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("complete turns: %w", err)
	}
	return seqs, nil
}
