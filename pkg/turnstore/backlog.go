package turnstore

import (
	"context"
	_ "embed"
	"fmt"
	"time"
)

// backlogAgeSQL returns the age in seconds of the oldest turn that could start now, or NULL when
// there is none. The queued branch walks its partial index oldest first and stops at its first
// eligible row; the branch of running turns whose lease expired reads the partial index of running
// turns whole (the turns in flight, however many finished turns the table holds) and sorts what it
// finds: a separate index on their lease expiry cost every claim, renewal and completion an index
// entry for this one query (migration 00070).
//
//go:embed backlog_age.sql
var backlogAgeSQL string

// BacklogAge returns the age of the oldest accepted turn that could start now but has not: queued,
// or running under an expired lease, and not behind a running turn of its own session with a live
// lease, and not held by a queue pause (migration 00270). A turn past its deadline cannot start (it expires; intake's re-driver marks it so) and a
// turn whose cancel was requested will not: neither is backlog, so neither holds the signal up. It is 0 when there is none (or Postgres's clock is behind the accepting replica's).
// Nor is a queued turn of a tenant (or tenant×agent) that runs as many turns as its concurrency
// quota allows (pkg/quota): it is held, and more workers could not start it.
func (s *Store) BacklogAge(ctx context.Context) (time.Duration, error) {
	return s.backlogAge(ctx, nil, false)
}

// BacklogAgeOf is BacklogAge of one agent's turns (pkg/agents); with isDefault, the turns of no
// agent (written before agents had names) are its too.
func (s *Store) BacklogAgeOf(ctx context.Context, agent string, isDefault bool) (time.Duration, error) {
	return s.backlogAge(ctx, &agent, isDefault)
}

// pausedTurnsSQL counts the queued turns a queue pause holds (migration 00270). The uncorrelated
// EXISTS is a one-time filter: without a pause the statement reads no turn at all.
//
//go:embed paused_turns.sql
var pausedTurnsSQL string

// PausedTurnsOf counts the queued turns of one agent (isDefault as in BacklogAgeOf) that a queue
// pause holds: they are not backlog (BacklogAgeOf skips them), since more workers cannot start
// them.
func (s *Store) PausedTurnsOf(ctx context.Context, agent string, isDefault bool) (int, error) {
	var n int
	if err := s.pool.QueryRow(ctx, pausedTurnsSQL, agent, isDefault).Scan(&n); err != nil {
		return 0, fmt.Errorf("count paused turns: %w", err)
	}
	return n, nil
}

func (s *Store) backlogAge(ctx context.Context, agent *string, isDefault bool) (time.Duration, error) {
	var secs *float64
	if err := s.pool.QueryRow(ctx, backlogAgeSQL, agent, isDefault).Scan(&secs); err != nil {
		return 0, fmt.Errorf("query backlog age: %w", err)
	}
	if secs == nil || *secs <= 0 {
		return 0, nil
	}
	return time.Duration(*secs * float64(time.Second)), nil
}
