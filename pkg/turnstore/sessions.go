package turnstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// claimSessionSQL records $2 as the session's owner unless it has one, and returns the owner.
//
//go:embed claim_session.sql
var claimSessionSQL string

// ClaimSession returns the session's owner, making tenant the owner of a session nobody used
// before. Ownership never changes once recorded.
func (s *Store) ClaimSession(ctx context.Context, sessionID, tenant string) (owner string, err error) {
	if err := s.pool.QueryRow(ctx, claimSessionSQL, sessionID, tenant).Scan(&owner); err != nil {
		return "", fmt.Errorf("claim session owner: %w", err)
	}
	return owner, nil
}

// SessionOwner returns the session's owner, or "" when no tenant used the session yet.
func (s *Store) SessionOwner(ctx context.Context, sessionID string) (string, error) {
	var owner string
	err := s.pool.QueryRow(ctx, `SELECT tenant FROM sessions WHERE session_id = $1`, sessionID).Scan(&owner)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read session owner: %w", err)
	}
	return owner, nil
}
