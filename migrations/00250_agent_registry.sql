-- +goose Up
-- The agent registry (services/intake/internal/registry; docs/REGISTRY.md).
--
-- One row per registered replica of a catalog agent. A registration is a lease: it stays while
-- its holder renews it (lease_expires_at), and the sweeper removes it after it expired, unless
-- the mass-expiry guard froze deletions for the agent (state 'frozen'). epoch is the fencing
-- token: it grows with every registration of the same instance ID, and a renewal names it, so a
-- holder that was replaced cannot renew (412). A removed registration stays as a tombstone
-- (state 'deleted') until the sweeper purges it (TURNSTILE_REGISTRY_TOMBSTONE_TTL), so a reader
-- that follows the changes learns of the removal.
CREATE TABLE agent_instances (
    agent            text        NOT NULL,
    instance_id      text        NOT NULL,
    endpoint         text        NOT NULL,
    zone             text        NOT NULL DEFAULT '',
    card_digest      text        NOT NULL DEFAULT '',
    epoch            bigint      NOT NULL,
    state            text        NOT NULL CHECK (state IN ('live', 'frozen', 'deleted')),
    lease_expires_at timestamptz NOT NULL,
    renewed_at       timestamptz NOT NULL,
    registered_at    timestamptz NOT NULL,
    -- revision is registry_head's value of the write that last changed what a snapshot shows
    -- (endpoint, zone, digest, epoch, state); renewals that change none of it do not move it.
    revision         bigint      NOT NULL,
    PRIMARY KEY (agent, instance_id)
);
CREATE INDEX agent_instances_revision_idx ON agent_instances (agent, revision);

-- registry_head is the revision counter: a write that changes a snapshot increments it in its own
-- transaction, and the row lock orders those writes, so revisions commit in order and a reader
-- that saw revision R has seen every change up to R. compacted is the highest revision of a
-- tombstone purged so far: a reader behind it reloads the whole snapshot.
CREATE TABLE registry_head (
    id        boolean PRIMARY KEY DEFAULT true CHECK (id),
    revision  bigint  NOT NULL DEFAULT 0,
    compacted bigint  NOT NULL DEFAULT 0
);
INSERT INTO registry_head DEFAULT VALUES;

-- +goose Down
DROP TABLE registry_head;
DROP TABLE agent_instances;
