package turnstore

import (
	"context"
	_ "embed"
	"fmt"
	"time"
)

// deleteFinishedSQL removes one batch of the oldest finished rows past their retention, with their
// notifications (turn_notifications), their attempts (turn_attempts) and, for a task's first turn, the task's push configs. Rows
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

// deleteIdleThreadsSQL removes one batch of LangGraph threads idle past their TTL, least recently
// used first, skipping a thread with a run queued or running.
//
//go:embed delete_idle_threads.sql
var deleteIdleThreadsSQL string

// DeleteIdleThreads deletes at most limit LangGraph threads (services/langgraph) whose last run was
// created, or which were created, more than ttl ago and which have no run queued or running, and
// returns how many it deleted. A thread's runs are its session's turns: they stay until
// DeleteFinished, as every turn. The statement takes rows with FOR UPDATE SKIP LOCKED, so
// several workers share them.
func (s *Store) DeleteIdleThreads(ctx context.Context, ttl time.Duration, limit int) (int, error) {
	tag, err := s.pool.Exec(ctx, deleteIdleThreadsSQL, ttl.Milliseconds(), limit)
	if err != nil {
		return 0, fmt.Errorf("delete idle threads: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
