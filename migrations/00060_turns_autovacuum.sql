-- +goose Up
-- Every claim, lease renewal and completion rewrites a turn's row, and the status and lease expiry
-- are indexed, so none of those updates is HOT: a busy worker pool leaves thousands of dead row
-- versions and index entries a second, and index scans over turns slow down as they pile up.
-- Autovacuum's default waits until a fifth of a table's rows are dead, which for a table of
-- millions of turns means hours of bloat; a fiftieth keeps it lean. (While autovacuum is off the
-- workers vacuum these tables themselves: services/worker/internal/vacuum.)
ALTER TABLE turns SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02);
ALTER TABLE sessions SET (autovacuum_vacuum_scale_factor = 0.05);

-- +goose Down
ALTER TABLE sessions RESET (autovacuum_vacuum_scale_factor);
ALTER TABLE turns RESET (autovacuum_vacuum_scale_factor, autovacuum_analyze_scale_factor);
