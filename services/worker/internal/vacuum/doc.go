// Package vacuum keeps the dead rows of the hot tables (turns, sessions, turn_attempts:
// turnstore.HotTables) bounded when Postgres's autovacuum does not.
//
// Every claim, lease renewal and completion rewrites a turn's row (status and lease expiry are
// indexed, so the updates are not HOT), so a busy worker pool leaves thousands of dead row versions
// and index entries a second. Autovacuum removes them; with it off, they pile up, every index scan
// over turns walks more of them, and completions slow down until a VACUUM removes them
// (docs/BENCHMARKS.md has the figures).
//
// A Vacuumer runs in every worker. Every interval it asks whether autovacuum covers the tables
// (the autovacuum setting, and the table's autovacuum_enabled storage option); if it does, it does
// nothing. Otherwise, for each table whose dead rows exceed max(MinDead, DeadFraction × live rows)
// (pg_stat_user_tables), it runs VACUUM (SKIP_LOCKED, ANALYZE): the statement takes no lock that
// blocks reads or writes, SKIP_LOCKED lets a second worker skip a table the first is vacuuming
// instead of queueing behind it, and ANALYZE keeps the planner's statistics, which autovacuum would
// also have kept, current. TURNSTILE_WORKER_VACUUM=off turns it off. Only a table's owner (or a
// superuser) may vacuum it — the role that ran the migrations owns them; for a table it does not
// own the worker warns once and leaves it alone.
//
// Where autovacuum is on, migration 00060 tunes it for the turns table (a vacuum after 2% of its
// rows changed, not 20%), so a large table is not left to bloat for hours.
package vacuum
