package vacuum

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/turnstile-run/turnstile/pkg/lifecycle"
	"github.com/turnstile-run/turnstile/pkg/turnstore"
)

// Defaults. No operator setting tunes these (TURNSTILE_WORKER_VACUUM only turns the vacuumer on
// or off), so they live here alone.
const (
	IntervalDefault     = 5 * time.Second
	MinDeadDefault      = 5000
	DeadFractionDefault = 0.05
)

// Config tunes a Vacuumer. Zero values mean defaults.
type Config struct {
	// Interval between checks. Defaults to IntervalDefault (5s).
	Interval time.Duration
	// MinDead is the fewest dead rows worth a VACUUM. Defaults to MinDeadDefault (5,000).
	MinDead int64
	// DeadFraction of live rows above which a table is vacuumed. Defaults to DeadFractionDefault
	// (0.05).
	DeadFraction float64
	// OnVacuum, if set, is called after every VACUUM with the table, its dead rows before, how long
	// it took and its error (metrics, tests). It must be fast.
	OnVacuum func(table string, dead int64, took time.Duration, err error)
}

// Vacuumer vacuums the hot tables while autovacuum does not.
type Vacuumer struct {
	cfg     Config
	db      *turnstore.Store
	log     *slog.Logger
	refused map[string]bool // tables this role may not vacuum: warned about once, not tried

	loop lifecycle.Loop
}

// New returns a vacuumer over pool.
func New(pool *pgxpool.Pool, cfg Config, log *slog.Logger) *Vacuumer {
	if cfg.Interval <= 0 {
		cfg.Interval = IntervalDefault
	}
	if cfg.MinDead <= 0 {
		cfg.MinDead = MinDeadDefault
	}
	if cfg.DeadFraction <= 0 {
		cfg.DeadFraction = DeadFractionDefault
	}
	return &Vacuumer{cfg: cfg, db: turnstore.New(pool), log: log, refused: map[string]bool{}}
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

// RunOnce checks the hot tables (turnstore.HotTables) once and vacuums those that need it. It
// returns the first error of the check; a failed VACUUM is logged and reported to OnVacuum.
func (v *Vacuumer) RunOnce(ctx context.Context) error {
	tables, err := v.db.TableStats(ctx, turnstore.HotTables)
	if err != nil {
		return err
	}
	for _, t := range tables {
		if !t.Autovacuum && !t.MayVacuum && !v.refused[t.Name] {
			v.refused[t.Name] = true
			v.log.Warn("autovacuum is off and the worker's role does not own the table: its dead rows will pile up",
				"table", t.Name)
		}
		if t.Autovacuum || v.refused[t.Name] || t.Dead < max(v.cfg.MinDead, int64(v.cfg.DeadFraction*float64(t.Live))) {
			continue
		}
		start := time.Now()
		err := v.db.Vacuum(ctx, t.Name)
		took := time.Since(start)
		if v.cfg.OnVacuum != nil {
			v.cfg.OnVacuum(t.Name, t.Dead, took, err)
		}
		if err != nil {
			if ctx.Err() == nil {
				v.log.Warn("VACUUM failed; trying again next interval", "table", t.Name, "err", err)
			}
			continue
		}
		v.log.Info("vacuumed (autovacuum is off)", "table", t.Name, "dead_rows", t.Dead, "live_rows", t.Live, "took", took.Round(time.Millisecond))
	}
	return nil
}
