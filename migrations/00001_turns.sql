-- +goose Up
-- The fencing token is global and only grows, so comparing two tokens of one turn is always
-- meaningful and a token can never be reused after a row is deleted and recreated.
CREATE SEQUENCE fencing_token_seq AS bigint;

CREATE TABLE sessions (
    session_id  text PRIMARY KEY,
    tenant      text NOT NULL,
    -- last_seq is the sequence number of the newest message in the session history; the history
    -- cache of a worker validates itself against it.
    last_seq    bigint NOT NULL DEFAULT 0,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- One row per turn: the claim, the lease, the outcome.
CREATE TABLE turns (
    turn_id          uuid PRIMARY KEY,
    session_id       text NOT NULL,
    tenant           text NOT NULL,
    status           text NOT NULL CHECK (status IN ('queued','running','succeeded','failed','cancelled','expired')),
    attempt          integer NOT NULL DEFAULT 0,
    -- handoffs counts attempts that ended by releasing the lease on drain: they are not the turn's
    -- fault, so they do not count towards TURNSTILE_MAX_ATTEMPTS.
    handoffs         integer NOT NULL DEFAULT 0,
    fencing_token    bigint NOT NULL DEFAULT 0,
    lease_owner      text,
    lease_expires_at timestamptz,
    cancel_requested boolean NOT NULL DEFAULT false,
    input            jsonb NOT NULL DEFAULT '{}'::jsonb,
    metadata         jsonb,
    output           jsonb,
    error            text,
    kafka_partition  integer,
    kafka_offset     bigint,
    accepted_at      timestamptz NOT NULL,
    deadline         timestamptz,
    started_at       timestamptz,
    finished_at      timestamptz,
    updated_at       timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX turns_session_idx ON turns (session_id, accepted_at DESC);
CREATE INDEX turns_running_lease_idx ON turns (lease_expires_at) WHERE status = 'running';
CREATE INDEX turns_finished_idx ON turns (finished_at) WHERE finished_at IS NOT NULL;

-- The session history: appended exactly once per turn, in the transaction that marks it done.
CREATE TABLE session_messages (
    session_id  text NOT NULL,
    seq         bigint NOT NULL,
    turn_id     uuid NOT NULL,
    role        text NOT NULL,
    content     text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, seq)
);
CREATE UNIQUE INDEX session_messages_turn_role_idx ON session_messages (turn_id, role);

-- +goose Down
DROP TABLE session_messages;
DROP TABLE turns;
DROP TABLE sessions;
DROP SEQUENCE fencing_token_seq;
