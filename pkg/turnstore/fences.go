package turnstore

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/google/uuid"

	"github.com/turnstile-run/turnstile/pkg/wire"
)

//go:embed fences.sql
var fencesSQL string

// Fences returns the newest fencing token handed out and each turn's current token (0 for a turn
// with no row), in one read: what a stream publisher needs to establish a session's fences in
// Redis after Redis lost them (streams.Fencer).
func (s *Store) Fences(ctx context.Context, turns []uuid.UUID) (floor wire.FenceToken, tokens []wire.FenceToken, err error) {
	if err := s.pool.QueryRow(ctx, fencesSQL, turns).Scan(&floor, &tokens); err != nil {
		return 0, nil, fmt.Errorf("read fencing tokens: %w", err)
	}
	return floor, tokens, nil
}
