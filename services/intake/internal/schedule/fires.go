package schedule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Fire is one claimed tick of a schedule: what it posts and the claim's number, which fences
// its owner (a replica that took the tick over bumped it).
type Fire struct {
	Tenant     string
	ScheduleID string
	Tick       time.Time
	SessionID  string
	Turn       json.RawMessage
	Posts      int
}

// due is a schedule whose next tick has come.
type due struct {
	Schedule
	tick time.Time
}

// due reads up to limit schedules whose next tick is at or before Postgres's clock, oldest
// tick first, and that clock.
func (st *Store) due(ctx context.Context, limit int) ([]due, time.Time, error) {
	rows, err := st.pool.Query(ctx, `SELECT `+columns+`, now() FROM schedules
		WHERE next_fire_at <= now() ORDER BY next_fire_at LIMIT $1`, limit)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("read due schedules: %w", err)
	}
	defer rows.Close()
	var out []due
	var now time.Time
	for rows.Next() {
		var s Schedule
		if err := rows.Scan(&s.Tenant, &s.ID, &s.Cron, &s.Timezone, &s.SessionID, &s.Turn, &s.Metadata, &s.Enabled,
			&s.EndTime, &s.NextFireAt, &s.CreatedAt, &s.UpdatedAt, &now); err != nil {
			return nil, time.Time{}, fmt.Errorf("read due schedules: %w", err)
		}
		out = append(out, due{Schedule: s, tick: *s.NextFireAt})
	}
	if err := rows.Err(); err != nil {
		return nil, time.Time{}, fmt.Errorf("read due schedules: %w", err)
	}
	return out, now, nil
}

// claim makes owner the one poster of d's tick: in one statement it moves the schedule's next
// tick from d's to next (only if no one moved it first) and records the fire. ok is false when
// another replica claimed the tick (or the schedule changed) first.
func (st *Store) claim(ctx context.Context, d due, next *time.Time, sessionID, owner string, lease time.Duration) (Fire, bool, error) {
	f := Fire{Tenant: d.Tenant, ScheduleID: d.ID, Tick: d.tick, SessionID: sessionID, Posts: 1}
	err := st.pool.QueryRow(ctx, `
		WITH claimed AS (
			UPDATE schedules SET next_fire_at = $4
			WHERE tenant = $1 AND schedule_id = $2 AND next_fire_at = $3
			RETURNING tenant, schedule_id, turn)
		INSERT INTO schedule_fires (tenant, schedule_id, tick_at, session_id, turn, owner, lease_until)
		SELECT tenant, schedule_id, $3, $5, turn, $6, now() + make_interval(secs => $7) FROM claimed
		ON CONFLICT DO NOTHING
		RETURNING turn`,
		d.Tenant, d.ID, d.tick, next, sessionID, owner, lease.Seconds()).Scan(&f.Turn)
	if errors.Is(err, pgx.ErrNoRows) {
		return Fire{}, false, nil
	}
	if err != nil {
		return Fire{}, false, fmt.Errorf("claim tick: %w", err)
	}
	return f, true, nil
}

// skip moves d's next tick to next without firing d's (ticks too late to fire); false when
// another replica moved it first.
func (st *Store) skip(ctx context.Context, d due, next *time.Time) (bool, error) {
	tag, err := st.pool.Exec(ctx, `UPDATE schedules SET next_fire_at = $4
		WHERE tenant = $1 AND schedule_id = $2 AND next_fire_at = $3`, d.Tenant, d.ID, d.tick, next)
	if err != nil {
		return false, fmt.Errorf("skip ticks: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// reclaim takes over up to limit fires whose owner's lease ran out before the post was answered
// (the owner died, or the post was refused for now): owner holds them for lease, and each one's
// claim number goes up, fencing the old owner. stale reports the fires whose tick is older than
// grace, which are given up rather than posted.
func (st *Store) reclaim(ctx context.Context, owner string, lease, grace time.Duration, limit int) (fires []Fire, stale []bool, err error) {
	rows, err := st.pool.Query(ctx, `
		UPDATE schedule_fires f SET owner = $1, lease_until = now() + make_interval(secs => $2), posts = f.posts + 1
		FROM (SELECT tenant, schedule_id, tick_at FROM schedule_fires
			WHERE fired_at IS NULL AND lease_until < now()
			ORDER BY lease_until LIMIT $4 FOR UPDATE SKIP LOCKED) p
		WHERE f.tenant = p.tenant AND f.schedule_id = p.schedule_id AND f.tick_at = p.tick_at
		RETURNING f.tenant, f.schedule_id, f.tick_at, f.session_id, f.turn, f.posts,
			f.tick_at < now() - make_interval(secs => $3)`,
		owner, lease.Seconds(), grace.Seconds(), limit)
	if err != nil {
		return nil, nil, fmt.Errorf("reclaim fires: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var f Fire
		var old bool
		if err := rows.Scan(&f.Tenant, &f.ScheduleID, &f.Tick, &f.SessionID, &f.Turn, &f.Posts, &old); err != nil {
			return nil, nil, fmt.Errorf("reclaim fires: %w", err)
		}
		fires, stale = append(fires, f), append(stale, old)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("reclaim fires: %w", err)
	}
	return fires, stale, nil
}

// finish records f's outcome, if f's claim is still the current one.
func (st *Store) finish(ctx context.Context, f Fire, outcome, turnID string) error {
	_, err := st.pool.Exec(ctx, `UPDATE schedule_fires SET fired_at = now(), outcome = $5, turn_id = nullif($6, '')
		WHERE tenant = $1 AND schedule_id = $2 AND tick_at = $3 AND posts = $4 AND fired_at IS NULL`,
		f.Tenant, f.ScheduleID, f.Tick, f.Posts, outcome, turnID)
	if err != nil {
		return fmt.Errorf("finish fire: %w", err)
	}
	return nil
}

// prune deletes the fires answered longer than retention ago.
func (st *Store) prune(ctx context.Context, retention time.Duration) error {
	_, err := st.pool.Exec(ctx, `DELETE FROM schedule_fires WHERE fired_at < now() - make_interval(secs => $1)`, retention.Seconds())
	if err != nil {
		return fmt.Errorf("prune fires: %w", err)
	}
	return nil
}

// untilNext is how long from Postgres's clock until the next tick or the next lease to run
// out; ok is false when there is neither.
func (st *Store) untilNext(ctx context.Context) (time.Duration, bool, error) {
	var secs *float64
	err := st.pool.QueryRow(ctx, `SELECT extract(epoch FROM least(
			(SELECT min(next_fire_at) FROM schedules WHERE next_fire_at IS NOT NULL),
			(SELECT min(lease_until) FROM schedule_fires WHERE fired_at IS NULL)) - now())::float8`).Scan(&secs)
	if err != nil {
		return 0, false, fmt.Errorf("read next tick: %w", err)
	}
	if secs == nil {
		return 0, false, nil
	}
	return time.Duration(*secs * float64(time.Second)), true, nil
}
