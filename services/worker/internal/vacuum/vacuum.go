package vacuum

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/turnstile-run/turnstile/pkg/lifecycle"
)

// Tables are the tables a Vacuumer looks after: the ones the hot path rewrites.
var Tables = []string{"turns", "sessions"}

// Config tunes a Vacuumer.
type Config struct {
	// Interval between checks. Defaults to 5s.
	Interval time.Duration
	// MinDead is the fewest dead rows worth a VACUUM. Defaults to 5,000.
	MinDead int64
	// DeadFraction of live rows above which a table is vacuumed. Defaults to 0.05.
	DeadFraction float64
	// OnVacuum, if set, is called after every VACUUM with the table, its dead rows before, how long
	// it took and its error (metrics, tests). It must be fast.
	OnVacuum func(table string, dead int64, took time.Duration, err error)
}

// Vacuumer vacuums the hot tables while autovacuum does not.
type Vacuumer struct {
	cfg     Config
	pool    *pgxpool.Pool
	log     *slog.Logger
	refused map[string]bool // tables this role may not vacuum: warned about once, not tried

	loop lifecycle.Loop
}

// New returns a vacuumer over pool.
func New(pool *pgxpool.Pool, cfg Config, log *slog.Logger) *Vacuumer {
	if cfg.Interval <= 0 {
		cfg.Interval = 5 * time.Second
	}
	if cfg.MinDead <= 0 {
		cfg.MinDead = 5000
	}
	if cfg.DeadFraction <= 0 {
		cfg.DeadFraction = 0.05
	}
	return &Vacuumer{cfg: cfg, pool: pool, log: log, refused: map[string]bool{}}
}

// Start begins checking after one interval and then every interval. It returns at once.
func (v *Vacuumer) Start(ctx context.Context) error {
	v.loop.Start(ctx, v.run)
	return nil
}

// Stop ends the loop and waits for a running VACUUM. Safe twice or before Start.
func (v *Vacuumer) Stop(ctx context.Context) error { return v.loop.Stop(ctx, "vacuumer") }

func (v *Vacuumer) run(ctx context.Context) {
	lifecycle.Every(ctx, v.cfg.Interval, func(ctx context.Context) {
		if err := v.RunOnce(ctx); err != nil && ctx.Err() == nil {
			v.log.Warn("checking dead rows failed; trying again next interval", "err", err)
		}
	})
}

// statsSQL reports, per table of the current schema, whether autovacuum covers it, whether this
// role may vacuum it (VACUUM by anyone else only warns and skips the table), and its live and dead
// rows.
const statsSQL = `
SELECT c.relname,
    current_setting('autovacuum')::boolean
        AND coalesce((SELECT option_value::boolean FROM pg_options_to_table(c.reloptions)
                      WHERE option_name = 'autovacuum_enabled'), true),
    pg_has_role(current_user, c.relowner, 'USAGE')
        OR coalesce((SELECT rolsuper FROM pg_roles WHERE rolname = current_user), false),
    coalesce(s.n_live_tup, 0), coalesce(s.n_dead_tup, 0)
FROM pg_class c
LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
WHERE c.oid = ANY(ARRAY(SELECT to_regclass(t) FROM unnest($1::text[]) AS t))`

// RunOnce checks the tables once and vacuums those that need it. It returns the first error of the
// check; a failed VACUUM is logged and reported to OnVacuum.
func (v *Vacuumer) RunOnce(ctx context.Context) error {
	type table struct {
		name       string
		autovacuum bool
		mayVacuum  bool
		live, dead int64
	}
	rows, err := v.pool.Query(ctx, statsSQL, Tables)
	if err != nil {
		return fmt.Errorf("read table statistics: %w", err)
	}
	tables, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (table, error) {
		var t table
		err := r.Scan(&t.name, &t.autovacuum, &t.mayVacuum, &t.live, &t.dead)
		return t, err
	})
	if err != nil {
		return fmt.Errorf("read table statistics: %w", err)
	}
	for _, t := range tables {
		if !t.autovacuum && !t.mayVacuum && !v.refused[t.name] {
			v.refused[t.name] = true
			v.log.Warn("autovacuum is off and the worker's role does not own the table: its dead rows will pile up",
				"table", t.name)
		}
		if t.autovacuum || v.refused[t.name] || t.dead < max(v.cfg.MinDead, int64(v.cfg.DeadFraction*float64(t.live))) {
			continue
		}
		start := time.Now()
		// The table name comes from Tables, not from input.
		_, err := v.pool.Exec(ctx, "VACUUM (SKIP_LOCKED, ANALYZE) "+pgx.Identifier{t.name}.Sanitize())
		took := time.Since(start)
		if v.cfg.OnVacuum != nil {
			v.cfg.OnVacuum(t.name, t.dead, took, err)
		}
		if err != nil {
			if ctx.Err() == nil {
				v.log.Warn("VACUUM failed; trying again next interval", "table", t.name, "err", err)
			}
			continue
		}
		v.log.Info("vacuumed (autovacuum is off)", "table", t.name, "dead_rows", t.dead, "live_rows", t.live, "took", took.Round(time.Millisecond))
	}
	return nil
}
