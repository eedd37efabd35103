package schedule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/robfig/cron/v3"

	// Schedules name IANA time zones; the binary carries the zone database, so a container
	// without one still reads them.
	_ "time/tzdata"
)

// ErrNotFound is a schedule the tenant does not have (another tenant's is answered the same way).
var ErrNotFound = errors.New("schedule not found")

// ErrLimit is a new schedule for a tenant that has its most schedules already.
var ErrLimit = errors.New("the tenant has its most schedules")

// parser reads five-field cron expressions, an optional leading seconds field, and the
// descriptors (@hourly, @every 1m, …).
var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Spec is a parsed cron expression in its time zone.
type Spec struct{ sched cron.Schedule }

// ParseSpec parses expr in the IANA zone tz ("" is UTC). A time zone inside the expression
// (TZ=…) is refused: the zone is its own field.
func ParseSpec(expr, tz string) (Spec, error) {
	if strings.Contains(expr, "TZ=") {
		return Spec{}, errors.New("the expression must not name a time zone (TZ=…): set timezone")
	}
	if tz == "" {
		tz = "UTC"
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return Spec{}, fmt.Errorf("unknown time zone %q", tz)
	}
	s, err := parser.Parse(expr)
	if err != nil {
		return Spec{}, fmt.Errorf("bad cron expression %q: %w", expr, err)
	}
	if ss, ok := s.(*cron.SpecSchedule); ok {
		ss.Location = loc
	}
	return Spec{sched: s}, nil
}

// Next is the first tick strictly after t, in UTC; zero when there is none.
func (s Spec) Next(t time.Time) time.Time {
	n := s.sched.Next(t)
	if n.IsZero() {
		return n
	}
	return n.UTC()
}

// Schedule is one stored schedule.
type Schedule struct {
	Tenant   string
	ID       string
	Cron     string
	Timezone string
	// SessionID is the session every tick posts to; empty: a new session each tick.
	SessionID string
	// Turn is the body posted each tick (a native turn request without turn_id or deadline).
	Turn     json.RawMessage
	Metadata json.RawMessage
	Enabled  bool
	EndTime  *time.Time
	// NextFireAt is the next tick to fire; nil when none will (disabled or past EndTime).
	NextFireAt *time.Time
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// next is the schedule's next tick after t: nil when disabled or past its end.
func (s Schedule) next(spec Spec, t time.Time) *time.Time {
	if !s.Enabled {
		return nil
	}
	n := spec.Next(t)
	if n.IsZero() || (s.EndTime != nil && n.After(*s.EndTime)) {
		return nil
	}
	return &n
}

// Store reads and writes schedules and their fires over a pool.
type Store struct{ pool *pgxpool.Pool }

// NewStore returns a store over pool.
func NewStore(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

const columns = `tenant, schedule_id, cron, timezone, coalesce(session_id, ''), turn, metadata, enabled, end_time, next_fire_at, created_at, updated_at`

func scan(row pgx.Row) (Schedule, error) {
	var s Schedule
	err := row.Scan(&s.Tenant, &s.ID, &s.Cron, &s.Timezone, &s.SessionID, &s.Turn, &s.Metadata, &s.Enabled, &s.EndTime, &s.NextFireAt, &s.CreatedAt, &s.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Schedule{}, ErrNotFound
	}
	return s, err
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Create stores s (its next tick computed from now) unless the tenant has most schedules
// already (ErrLimit): the count and the insert are one transaction under a lock named by the
// tenant, so concurrent creations cannot pass the bound.
func (st *Store) Create(ctx context.Context, s Schedule, most int) (Schedule, error) {
	spec, err := ParseSpec(s.Cron, s.Timezone)
	if err != nil {
		return Schedule{}, err
	}
	if len(s.Metadata) == 0 || string(s.Metadata) == "null" {
		s.Metadata = json.RawMessage(`{}`)
	}
	if s.Timezone == "" {
		s.Timezone = "UTC"
	}
	tx, err := st.pool.Begin(ctx)
	if err != nil {
		return Schedule{}, fmt.Errorf("create schedule: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('schedules:' || $1, 0))`, s.Tenant); err != nil {
		return Schedule{}, fmt.Errorf("create schedule: %w", err)
	}
	var n int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM schedules WHERE tenant = $1`, s.Tenant).Scan(&n); err != nil {
		return Schedule{}, fmt.Errorf("create schedule: %w", err)
	}
	if n >= most {
		return Schedule{}, ErrLimit
	}
	out, err := scan(tx.QueryRow(ctx, `
		INSERT INTO schedules (tenant, schedule_id, cron, timezone, session_id, turn, metadata, enabled, end_time, next_fire_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
		RETURNING `+columns,
		s.Tenant, s.ID, s.Cron, s.Timezone, nullable(s.SessionID), s.Turn, s.Metadata, s.Enabled, s.EndTime, s.next(spec, time.Now())))
	if err != nil {
		return Schedule{}, fmt.Errorf("create schedule: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return Schedule{}, fmt.Errorf("create schedule: %w", err)
	}
	return out, nil
}

// Get reads the tenant's schedule id.
func (st *Store) Get(ctx context.Context, tenant, id string) (Schedule, error) {
	s, err := scan(st.pool.QueryRow(ctx, `SELECT `+columns+` FROM schedules WHERE tenant = $1 AND schedule_id = $2`, tenant, id))
	if err != nil && !errors.Is(err, ErrNotFound) {
		return Schedule{}, fmt.Errorf("get schedule: %w", err)
	}
	return s, err
}

// Filter selects a tenant's schedules. Zero fields select all.
type Filter struct {
	// SessionID selects the schedules of one session; "-" selects those without a session.
	SessionID string
	Enabled   *bool
	// Metadata selects schedules whose metadata contains this JSON object (jsonb @>).
	Metadata json.RawMessage
	Limit    int
	Offset   int
	// Order is "created_at" (default), "updated_at" or "next_fire_at", ascending unless Desc.
	Order string
	Desc  bool
}

// List reads a page of the tenant's schedules matching f and how many match in all.
func (st *Store) List(ctx context.Context, tenant string, f Filter) ([]Schedule, int, error) {
	where := `tenant = $1 AND ($2 = '' OR ($2 = '-' AND session_id IS NULL) OR session_id = $2)
		AND ($3::boolean IS NULL OR enabled = $3) AND ($4::jsonb IS NULL OR metadata @> $4::jsonb)`
	var md any
	if len(f.Metadata) > 0 && string(f.Metadata) != "null" {
		md = string(f.Metadata)
	}
	var total int
	if err := st.pool.QueryRow(ctx, `SELECT count(*) FROM schedules WHERE `+where, tenant, f.SessionID, f.Enabled, md).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("count schedules: %w", err)
	}
	order := "created_at"
	switch f.Order {
	case "updated_at", "next_fire_at":
		order = f.Order
	}
	dir := "ASC"
	if f.Desc {
		dir = "DESC"
	}
	if f.Limit <= 0 {
		return nil, total, nil
	}
	rows, err := st.pool.Query(ctx, `SELECT `+columns+` FROM schedules WHERE `+where+
		` ORDER BY `+order+` `+dir+` NULLS LAST, schedule_id LIMIT $5 OFFSET $6`,
		tenant, f.SessionID, f.Enabled, md, f.Limit, f.Offset)
	if err != nil {
		return nil, 0, fmt.Errorf("list schedules: %w", err)
	}
	defer rows.Close()
	var out []Schedule
	for rows.Next() {
		s, err := scan(rows)
		if err != nil {
			return nil, 0, fmt.Errorf("list schedules: %w", err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("list schedules: %w", err)
	}
	return out, total, nil
}

// Patch is an update of a schedule: nil fields are left as they are.
type Patch struct {
	Cron     *string
	Timezone *string
	Turn     json.RawMessage
	Metadata json.RawMessage
	Enabled  *bool
	// EndTime replaces the end when SetEndTime (nil then removes it).
	EndTime    *time.Time
	SetEndTime bool
}

// Update applies p to the tenant's schedule id and recomputes its next tick from now, in one
// transaction that holds the row, so a tick is claimed either under the old schedule or the new.
func (st *Store) Update(ctx context.Context, tenant, id string, p Patch) (Schedule, error) {
	tx, err := st.pool.Begin(ctx)
	if err != nil {
		return Schedule{}, fmt.Errorf("update schedule: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	s, err := scan(tx.QueryRow(ctx, `SELECT `+columns+` FROM schedules WHERE tenant = $1 AND schedule_id = $2 FOR UPDATE`, tenant, id))
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return Schedule{}, err
		}
		return Schedule{}, fmt.Errorf("update schedule: %w", err)
	}
	if p.Cron != nil {
		s.Cron = *p.Cron
	}
	if p.Timezone != nil {
		s.Timezone = *p.Timezone
	}
	if len(p.Turn) > 0 {
		s.Turn = p.Turn
	}
	if len(p.Metadata) > 0 {
		s.Metadata = p.Metadata
	}
	if p.Enabled != nil {
		s.Enabled = *p.Enabled
	}
	if p.SetEndTime {
		s.EndTime = p.EndTime
	}
	spec, err := ParseSpec(s.Cron, s.Timezone)
	if err != nil {
		return Schedule{}, err
	}
	out, err := scan(tx.QueryRow(ctx, `
		UPDATE schedules SET cron = $3, timezone = $4, turn = $5, metadata = $6, enabled = $7, end_time = $8,
			next_fire_at = $9, updated_at = now()
		WHERE tenant = $1 AND schedule_id = $2 RETURNING `+columns,
		tenant, id, s.Cron, s.Timezone, s.Turn, s.Metadata, s.Enabled, s.EndTime, s.next(spec, time.Now())))
	if err != nil {
		return Schedule{}, fmt.Errorf("update schedule: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return Schedule{}, fmt.Errorf("update schedule: %w", err)
	}
	return out, nil
}

// Delete deletes the tenant's schedule id and its fires; the turns it posted stay.
func (st *Store) Delete(ctx context.Context, tenant, id string) error {
	tag, err := st.pool.Exec(ctx, `DELETE FROM schedules WHERE tenant = $1 AND schedule_id = $2`, tenant, id)
	if err != nil {
		return fmt.Errorf("delete schedule: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}
