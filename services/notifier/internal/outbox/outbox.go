package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrFenced means the row is no longer held with the token: another notifier took it over, or it
// was settled.
var ErrFenced = errors.New("outbox: notification is held by another claim")

// Notification is one claimed row.
type Notification struct {
	ID      int64
	TurnID  uuid.UUID
	Tenant  string
	URL     string
	Token   string
	Status  string
	Payload json.RawMessage
	// Format is "native" (Payload is the body), "a2a" (Payload is the task's turns, rendered as
	// the A2A Task by package a2atask) or "a2a-1.0" (the same, rendered as A2A 1.0's
	// StreamResponse); AuthHeader is the Authorization an A2A config asks for.
	Format     string
	AuthHeader string
	Created    time.Time
	Attempts   int // attempts made before this one
	Fencing    int64
}

// WebhookID is the Standard Webhooks message ID: the row's, so every retry of one notification
// carries the same one and a receiver can drop duplicates.
func (n Notification) WebhookID() string { return fmt.Sprintf("msg_%d", n.ID) }

// Store reads and settles outbox rows.
type Store struct{ pool *pgxpool.Pool }

// New returns a store over pool.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// claimSQL takes up to $3 due rows, each its turn's oldest open row, unleased or with a lapsed
// lease, for owner $1 for $2 milliseconds, with a fresh fencing token each.
const claimSQL = `
WITH due AS (
    SELECT n.id FROM turn_notifications n
    WHERE n.delivered_at IS NULL AND n.dead_at IS NULL AND n.due_at <= now()
      AND (n.lease_expires_at IS NULL OR n.lease_expires_at < now())
      AND NOT EXISTS (
          SELECT 1 FROM turn_notifications o
          WHERE o.turn_id = n.turn_id AND o.id < n.id AND o.delivered_at IS NULL AND o.dead_at IS NULL)
    ORDER BY n.due_at, n.id
    LIMIT $3
    FOR UPDATE SKIP LOCKED
)
UPDATE turn_notifications n SET lease_owner = $1, lease_expires_at = now() + $2 * interval '1 millisecond',
    fencing_token = nextval('fencing_token_seq')
FROM due WHERE n.id = due.id
RETURNING n.id, n.turn_id, n.tenant, n.url, coalesce(n.token, ''), n.status, n.payload, n.format,
    coalesce(n.auth_header, ''), n.created_at, n.attempts, n.fencing_token`

// Claim takes up to limit due rows for owner for lease.
func (s *Store) Claim(ctx context.Context, owner string, lease time.Duration, limit int) ([]Notification, error) {
	rows, err := s.pool.Query(ctx, claimSQL, owner, lease.Milliseconds(), limit)
	if err != nil {
		return nil, fmt.Errorf("claim notifications: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Notification, error) {
		var n Notification
		err := r.Scan(&n.ID, &n.TurnID, &n.Tenant, &n.URL, &n.Token, &n.Status, &n.Payload, &n.Format, &n.AuthHeader,
			&n.Created, &n.Attempts, &n.Fencing)
		return n, err
	})
	if err != nil {
		return nil, fmt.Errorf("claim notifications: %w", err)
	}
	return out, nil
}

func (s *Store) settle(ctx context.Context, what, sql string, args ...any) error {
	tag, err := s.pool.Exec(ctx, sql, args...)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if tag.RowsAffected() == 0 {
		return ErrFenced
	}
	return nil
}

// Delivered records that the receiver took the notification.
func (s *Store) Delivered(ctx context.Context, n Notification) error {
	return s.settle(ctx, "mark notification delivered", `
		UPDATE turn_notifications SET delivered_at = now(), attempts = attempts + 1, last_error = NULL,
			lease_owner = NULL, lease_expires_at = NULL
		WHERE id = $1 AND fencing_token = $2 AND delivered_at IS NULL AND dead_at IS NULL`, n.ID, n.Fencing)
}

// Retry records a failed attempt and makes the row due again after wait.
func (s *Store) Retry(ctx context.Context, n Notification, wait time.Duration, lastErr string) error {
	return s.settle(ctx, "schedule notification retry", `
		UPDATE turn_notifications SET attempts = attempts + 1, last_error = $3,
			due_at = now() + $4 * interval '1 millisecond', lease_owner = NULL, lease_expires_at = NULL
		WHERE id = $1 AND fencing_token = $2 AND delivered_at IS NULL AND dead_at IS NULL`,
		n.ID, n.Fencing, lastErr, wait.Milliseconds())
}

// Dead gives the notification up with its last error (the dead letter): the turn's next row
// becomes claimable.
func (s *Store) Dead(ctx context.Context, n Notification, lastErr string) error {
	return s.settle(ctx, "dead-letter notification", `
		UPDATE turn_notifications SET attempts = attempts + 1, last_error = $3, dead_at = now(),
			lease_owner = NULL, lease_expires_at = NULL
		WHERE id = $1 AND fencing_token = $2 AND delivered_at IS NULL AND dead_at IS NULL`, n.ID, n.Fencing, lastErr)
}

// Defer hands the row back unattempted, due again after wait: its destination is at its
// concurrency limit or its circuit is open, and the attempt was not the receiver's to fail.
func (s *Store) Defer(ctx context.Context, n Notification, wait time.Duration) error {
	return s.settle(ctx, "defer notification", `
		UPDATE turn_notifications SET due_at = now() + $3 * interval '1 millisecond',
			lease_owner = NULL, lease_expires_at = NULL
		WHERE id = $1 AND fencing_token = $2 AND delivered_at IS NULL AND dead_at IS NULL`, n.ID, n.Fencing, wait.Milliseconds())
}

// Release hands claimed rows back unsettled (a stopping notifier), so another takes them at once.
func (s *Store) Release(ctx context.Context, n Notification) error {
	return s.settle(ctx, "release notification", `
		UPDATE turn_notifications SET lease_owner = NULL, lease_expires_at = NULL
		WHERE id = $1 AND fencing_token = $2 AND delivered_at IS NULL AND dead_at IS NULL`, n.ID, n.Fencing)
}

// Stats is the outbox as the metrics show it.
type Stats struct {
	Open      int64
	OldestAge time.Duration
	Dead      int64
}

// Stats reads the open rows' count and the oldest one's age, and the dead-lettered rows' count.
// Each part reads only its partial index (turn_notifications_open_idx, turn_notifications_dead_idx),
// so the cost follows the open and dead rows, not the delivered history.
func (s *Store) Stats(ctx context.Context) (Stats, error) {
	var st Stats
	var ageMs float64
	err := s.pool.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM turn_notifications WHERE delivered_at IS NULL AND dead_at IS NULL),
			coalesce((SELECT extract(epoch FROM now() - min(created_at)) * 1000 FROM turn_notifications
				WHERE delivered_at IS NULL AND dead_at IS NULL), 0),
			(SELECT count(*) FROM turn_notifications WHERE dead_at IS NOT NULL)`).Scan(&st.Open, &ageMs, &st.Dead)
	if err != nil {
		return Stats{}, fmt.Errorf("read outbox stats: %w", err)
	}
	st.OldestAge = time.Duration(ageMs * float64(time.Millisecond))
	return st, nil
}
