-- +goose Up
-- The workers alive now: each worker process upserts its row every heartbeat interval (its
-- identity is its lease owner, TURNSTILE_INSTANCE_ID) and reads back drain_requested, which the
-- admin API's drain action sets. A process that starts under an identity resets its row, so a
-- restarted worker serves again.
CREATE TABLE worker_heartbeats (
    identity        text PRIMARY KEY,
    version         text NOT NULL,
    agents          text[] NOT NULL DEFAULT '{}',
    in_flight       integer NOT NULL DEFAULT 0,
    draining        boolean NOT NULL DEFAULT false,
    drain_requested boolean NOT NULL DEFAULT false,
    drain_by        text,
    started_at      timestamptz NOT NULL DEFAULT now(),
    last_seen       timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE worker_heartbeats;
