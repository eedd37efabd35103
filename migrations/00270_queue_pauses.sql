-- +goose Up
-- Paused queues (admin API, POST /v1/admin/pauses): a row pauses the turns of a tenant (agent ''),
-- of an agent (tenant ''), or of one tenant's turns of one agent. A worker's claim does not start
-- a turn a pause covers (pkg/turnstore/claim.sql: outcome PAUSED), and the backlog age does not
-- count it (pkg/turnstore/backlog_age.sql): more workers cannot start it. The table stays tiny, so
-- every probe of it is a scan of a page or two.
CREATE TABLE queue_pauses (
    tenant    text NOT NULL DEFAULT '',
    agent     text NOT NULL DEFAULT '',
    reason    text,
    paused_by text NOT NULL,
    paused_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, agent),
    CHECK (tenant <> '' OR agent <> '')
);

-- +goose Down
DROP TABLE queue_pauses;
