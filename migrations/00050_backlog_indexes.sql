-- +goose Up
-- The backlog-age query (pkg/backlog) walks queued turns oldest first and, for each, asks whether its
-- session has a live running turn. These two partial indexes keep both steps an index probe however
-- many finished turns the table holds.
CREATE INDEX turns_queued_accepted_idx ON turns (accepted_at) WHERE status = 'queued';
CREATE INDEX turns_running_session_idx ON turns (session_id) WHERE status = 'running';

-- +goose Down
DROP INDEX turns_running_session_idx;
DROP INDEX turns_queued_accepted_idx;
