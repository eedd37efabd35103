-- +goose Up
-- The agent a turn goes to (pkg/agents). NULL is the installation's default agent: every row
-- written before agents had names is the default agent's, and its record is in the turns topic.
-- The re-driver produces a lost record again to the topic of its row's agent, and the backlog-age
-- signal is kept per agent; neither needs an index of its own (both walk the partial indexes of
-- unfinished turns).
ALTER TABLE turns ADD COLUMN agent text;

-- +goose Down
ALTER TABLE turns DROP COLUMN agent;
