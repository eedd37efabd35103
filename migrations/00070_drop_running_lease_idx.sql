-- +goose Up
-- Every claim inserted its turn into both partial indexes of running turns, and every completion
-- and renewal left a dead entry in both, for one reader of this one: the backlog-age query's
-- branch for running turns whose lease expired. That branch now walks turns_running_session_idx,
-- which holds the same rows (the turns in flight, a few thousand at most, whatever the table's
-- size: under a millisecond), and the lease expiry is read from the row.
DROP INDEX turns_running_lease_idx;

-- +goose Down
CREATE INDEX turns_running_lease_idx ON turns (lease_expires_at) WHERE status = 'running';
