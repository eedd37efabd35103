package turnstore

import (
	"context"
	_ "embed"
	"fmt"
	"time"
)

// deleteFinishedSQL removes one batch of the oldest finished rows past their retention. Rows are
// picked with FOR UPDATE SKIP LOCKED, so statements of several workers share the rows instead of
// queueing behind each other.
//
//go:embed delete_finished.sql
var deleteFinishedSQL string

// DeleteFinished deletes at most limit turn rows, oldest first, that finished more than retention
// ago and are not owed to the dead-letter topic, and returns how many it deleted. Queued and
// running turns and the session history are never deleted.
func (s *Store) DeleteFinished(ctx context.Context, retention time.Duration, limit int) (int, error) {
	tag, err := s.pool.Exec(ctx, deleteFinishedSQL, retention.Milliseconds(), limit)
	if err != nil {
		return 0, fmt.Errorf("delete finished turns: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
