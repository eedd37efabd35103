-- +goose Up
-- Every claim inserts its turn into each partial index of running turns, and every completion and
-- renewal leaves a dead entry in each. This index's one reader, the backlog-age query's branch for
-- running turns whose lease expired, walks turns_running_session_idx instead, which holds the same
-- rows (the turns in flight, a few thousand at most whatever the table's size), and reads the
-- lease expiry from the row.
DROP INDEX turns_running_lease_idx;

-- +goose Down
CREATE INDEX turns_running_lease_idx ON turns (lease_expires_at) WHERE status = 'running';
