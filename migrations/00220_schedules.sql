-- +goose Up
-- Schedules (services/intake/internal/schedule): a turn posted on every tick of a cron
-- expression, to one session or to a new session each tick. next_fire_at is the next tick to
-- claim; NULL when there is none (disabled, or past end_time).
CREATE TABLE schedules (
    tenant       text        NOT NULL,
    schedule_id  text        NOT NULL,
    cron         text        NOT NULL,
    timezone     text        NOT NULL DEFAULT 'UTC',
    session_id   text,
    turn         jsonb       NOT NULL,
    metadata     jsonb       NOT NULL DEFAULT '{}'::jsonb,
    enabled      boolean     NOT NULL DEFAULT true,
    end_time     timestamptz,
    next_fire_at timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, schedule_id)
);
CREATE INDEX schedules_due_idx ON schedules (next_fire_at) WHERE next_fire_at IS NOT NULL;

-- One row per claimed tick: the primary key is the claim, so two replicas never both own a
-- tick. The row holds the session and body the tick posts, so a replica that takes over a tick
-- whose owner died before it was posted posts the same turn (its idempotency key is the tick's).
-- fired_at is NULL until the post was answered; lease_until bounds how long the owner may take.
CREATE TABLE schedule_fires (
    tenant      text        NOT NULL,
    schedule_id text        NOT NULL,
    tick_at     timestamptz NOT NULL,
    session_id  text        NOT NULL,
    turn        jsonb       NOT NULL,
    owner       text        NOT NULL,
    posts       integer     NOT NULL DEFAULT 1,
    lease_until timestamptz NOT NULL,
    fired_at    timestamptz,
    outcome     text,
    turn_id     text,
    PRIMARY KEY (tenant, schedule_id, tick_at),
    FOREIGN KEY (tenant, schedule_id) REFERENCES schedules ON DELETE CASCADE
);
CREATE INDEX schedule_fires_pending_idx ON schedule_fires (lease_until) WHERE fired_at IS NULL;
CREATE INDEX schedule_fires_fired_idx ON schedule_fires (fired_at) WHERE fired_at IS NOT NULL;

-- +goose Down
DROP TABLE schedule_fires;
DROP TABLE schedules;
