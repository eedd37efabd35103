package turnstore

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// The statements intake runs while it accepts a turn: its queued-turn quota and the multitask
// strategies reject and interrupt.
var (
	//go:embed session_busy.sql
	sessionBusySQL string
	//go:embed cancel_earlier.sql
	cancelEarlierSQL string
)

// CountQueued returns how many of the tenant's turns are queued (accepted, not yet started).
func (s *Store) CountQueued(ctx context.Context, tenant string) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM turns WHERE tenant = $1 AND status = 'queued'`, tenant).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count queued turns: %w", err)
	}
	return n, nil
}

// SessionBusy reports whether the session has a queued or running turn other than except (which
// may be a retry of the very request asking).
func (s *Store) SessionBusy(ctx context.Context, sessionID string, except uuid.UUID) (bool, error) {
	var busy bool
	err := s.pool.QueryRow(ctx, sessionBusySQL, sessionID, except).Scan(&busy)
	if err != nil {
		return false, fmt.Errorf("check session busy: %w", err)
	}
	return busy, nil
}

// CancelEarlier requests cancellation of every live turn of the session, other than except,
// accepted at or before acceptedAt, and returns how many it marked. A running turn's worker sees
// the request at its next lease renewal; a queued one ends as cancelled at its claim.
func (s *Store) CancelEarlier(ctx context.Context, sessionID string, except uuid.UUID, acceptedAt time.Time) (int64, error) {
	tag, err := s.pool.Exec(ctx, cancelEarlierSQL, sessionID, except, acceptedAt)
	if err != nil {
		return 0, fmt.Errorf("cancel earlier turns: %w", err)
	}
	return tag.RowsAffected(), nil
}
