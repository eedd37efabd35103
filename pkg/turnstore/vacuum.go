package turnstore

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// HotTables are the tables the hot path rewrites: every claim, lease renewal and completion
// rewrites a turn's row, every completion its session's, and every attempt's end its
// turn_attempts row (written at its claim).
var HotTables = []string{"turns", "sessions", "turn_attempts"}

// TableStat is what TableStats reports of one table.
type TableStat struct {
	Name string
	// Autovacuum reports whether autovacuum covers the table: the server's setting and the table's
	// autovacuum_enabled storage option.
	Autovacuum bool
	// MayVacuum reports whether this role may vacuum the table (VACUUM by anyone else only warns
	// and skips it).
	MayVacuum bool
	// Live and Dead are the table's live and dead rows (pg_stat_user_tables).
	Live, Dead int64
}

// tableStatsSQL reports, per table of the current schema, whether autovacuum covers it, whether
// this role may vacuum it, and its live and dead rows.
//
//go:embed table_stats.sql
var tableStatsSQL string

// TableStats reports on the named tables of the current schema; a name that is not one is left
// out.
func (s *Store) TableStats(ctx context.Context, tables []string) ([]TableStat, error) {
	rows, err := s.pool.Query(ctx, tableStatsSQL, tables)
	if err != nil {
		return nil, fmt.Errorf("read table statistics: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (TableStat, error) {
		var t TableStat
		err := r.Scan(&t.Name, &t.Autovacuum, &t.MayVacuum, &t.Live, &t.Dead)
		return t, err
	})
	if err != nil {
		return nil, fmt.Errorf("read table statistics: %w", err)
	}
	return out, nil
}

// Vacuum runs VACUUM (SKIP_LOCKED, ANALYZE) on the table: it takes no lock that blocks reads or
// writes, skips the table if another VACUUM holds it, and keeps the planner's statistics current.
// table must be a name this program chose (such as one of HotTables), never input.
func (s *Store) Vacuum(ctx context.Context, table string) error {
	if _, err := s.pool.Exec(ctx, "VACUUM (SKIP_LOCKED, ANALYZE) "+pgx.Identifier{table}.Sanitize()); err != nil {
		return fmt.Errorf("vacuum %s: %w", table, err)
	}
	return nil
}
