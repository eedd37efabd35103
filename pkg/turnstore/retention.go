package turnstore

import (
	"context"
	_ "embed"
	"fmt"
	"time"
)

// deleteFinishedSQL removes one batch of the oldest finished rows past their retention, with their
// notifications (turn_notifications) and, for a task's first turn, the task's push configs. Rows
// are picked with FOR UPDATE SKIP LOCKED, so statements of several workers share the rows instead
// of queueing behind each other.
//
//go:embed delete_finished.sql
var deleteFinishedSQL string

// DeleteFinished deletes at most limit turn rows, oldest first, that finished more than retention
// ago and are not owed to the dead-letter topic, with their notifications and the push configs of
// the tasks they began, and returns how many turns it deleted. Queued and
// running turns and the session history are never deleted; session rows left without turns go
// with DeleteIdleSessions.
func (s *Store) DeleteFinished(ctx context.Context, retention time.Duration, limit int) (int, error) {
	var n int
	if err := s.pool.QueryRow(ctx, deleteFinishedSQL, retention.Milliseconds(), limit).Scan(&n); err != nil {
		return 0, fmt.Errorf("delete finished turns: %w", err)
	}
	return n, nil
}

// deleteIdleSessionsSQL removes one batch of session rows that have no turn left and were last
// updated more than the retention ago.
//
//go:embed delete_idle_sessions.sql
var deleteIdleSessionsSQL string

// DeleteIdleSessions deletes at most limit session rows that no turn row refers to any more (their
// turns were deleted by DeleteFinished, or never recorded) and that were last updated more than
// retention ago, and returns how many it deleted. The age keeps a session claimed a moment ago,
// whose first turn's row is still on its way, from being deleted under it.
func (s *Store) DeleteIdleSessions(ctx context.Context, retention time.Duration, limit int) (int, error) {
	tag, err := s.pool.Exec(ctx, deleteIdleSessionsSQL, retention.Milliseconds(), limit)
	if err != nil {
		return 0, fmt.Errorf("delete idle sessions: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
