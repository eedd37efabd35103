package turnstore

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/google/uuid"

	"github.com/turnstile-run/turnstile/pkg/wire"
)

// The statements intake runs while it accepts a turn: its queued-turn quota and the multitask
// strategies reject and interrupt.
var (
	//go:embed session_busy.sql
	sessionBusySQL string
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
func (s *Store) SessionBusy(ctx context.Context, session wire.SessionKey, except uuid.UUID) (bool, error) {
	var busy bool
	err := s.pool.QueryRow(ctx, sessionBusySQL, session, except).Scan(&busy)
	if err != nil {
		return false, fmt.Errorf("check session busy: %w", err)
	}
	return busy, nil
}
