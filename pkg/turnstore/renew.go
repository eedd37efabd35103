package turnstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/turnstile-run/turnstile/pkg/pgarray"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

// ErrFenced is returned when a statement's fencing token is no longer the turn's: another attempt
// took over, or the turn ended.
var ErrFenced = errors.New("fencing token is stale")

// RenewParams are the leases one renewal statement extends, as column arrays, and the lease
// duration from now.
type RenewParams struct {
	TurnIDs pgarray.UUIDs
	Tokens  pgarray.Ints
	TTL     time.Duration
}

// args are renewSQL's arguments.
func (p *RenewParams) args() []any { return []any{p.TurnIDs, p.Tokens, p.TTL.Milliseconds()} }

// Renewal is a lease the renewal extended.
type Renewal struct {
	TurnID          uuid.UUID
	CancelRequested bool
}

//go:embed renew.sql
var renewTemplate string

// renewSQL extends the leases still held, locking them in turn_id order (see lockedTurnsSQL).
// lease_owner is checked after the lock: a renewal that raced a release must not extend it.
var renewSQL = include(renewTemplate, "locked_turns.sql", lockedTurnsSQL)

// RenewLeases extends every lease of p that is still held, in one statement, and returns those it
// extended with their cancel flags. A lease missing from the result is lost: fenced by a newer
// attempt, the turn ended, or the lease was released (ReleaseLease clears lease_owner).
func (s *Store) RenewLeases(ctx context.Context, p *RenewParams) ([]Renewal, error) {
	rows, err := s.pool.Query(ctx, renewSQL, p.args()...)
	if err != nil {
		return nil, fmt.Errorf("renew leases: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Renewal, error) {
		var rn Renewal
		err := r.Scan(&rn.TurnID, &rn.CancelRequested)
		return rn, err
	})
	if err != nil {
		return nil, fmt.Errorf("renew leases: %w", err)
	}
	return out, nil
}

// ReleaseLease gives up the lease of a running turn held with token, so another worker can take the
// turn over at once (ErrFenced if the token is not the turn's). handoff marks a release on drain,
// which does not count towards the attempt limit; a release after a failed attempt does.
func (s *Store) ReleaseLease(ctx context.Context, turnID uuid.UUID, token wire.FenceToken, handoff bool) error {
	inc := 0
	if handoff {
		inc = 1
	}
	tag, err := s.pool.Exec(ctx, `
		UPDATE turns SET lease_expires_at = now() - interval '1 millisecond', lease_owner = NULL,
			handoffs = handoffs + $3, updated_at = now()
		WHERE turn_id = $1 AND fencing_token = $2 AND status = 'running'`, turnID, token, inc)
	if err != nil {
		return fmt.Errorf("release lease: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return ErrFenced
	}
	return nil
}

// EndAttempt releases the lease of a running turn held with token, as ReleaseLease does, and in
// the same statement stores errMsg (when not empty) as the turn's error, so its status shows why it
// is retried, and ends the attempt's row with outcome, errMsg and end (ErrFenced if the token is
// not the turn's: then nothing changed).
func (s *Store) EndAttempt(ctx context.Context, turnID uuid.UUID, token wire.FenceToken, handoff bool, outcome, errMsg string, end AttemptEnd) error {
	inc := 0
	if handoff {
		inc = 1
	}
	var n int
	err := s.pool.QueryRow(ctx, `WITH ended AS (
		UPDATE turns SET lease_expires_at = now() - interval '1 millisecond', lease_owner = NULL,
			handoffs = handoffs + $5, error = coalesce(nullif($4, ''), error), updated_at = now()
		WHERE turn_id = $1 AND fencing_token = $2 AND status = 'running'
		RETURNING turn_id
	), attempt AS (`+endAttemptSQL+`)
	SELECT count(*) FROM ended`, turnID, token, outcome, errMsg, inc, end.Upstream, end.Events, end.Waits).Scan(&n)
	if err != nil {
		return fmt.Errorf("end attempt: %w", err)
	}
	if n == 0 {
		return ErrFenced
	}
	return nil
}
