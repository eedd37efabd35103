-- +goose Up
-- One row per attempt of a turn, for the admin timeline (GET /v1/admin/turns/{id}/timeline): the
-- turn's row holds only its last lease, so who ran an earlier attempt, under which fencing token,
-- and how it ended would otherwise be lost. The worker's claim statement inserts the row in the
-- statement that takes the lease (pkg/turnstore/claim.sql); the statement that ends the attempt
-- (completion, finish, release) fills in its end. An attempt whose worker died or lost its lease
-- has no end: the timeline shows it as lost once a later token holds the turn. Rows go with their
-- turn (pkg/turnstore/delete_finished.sql). Only the primary key is indexed, and the end's update
-- changes no indexed column, so it can be a HOT update.
CREATE TABLE turn_attempts (
    turn_id          uuid NOT NULL,
    fencing_token    bigint NOT NULL,
    attempt          integer NOT NULL,
    worker           text NOT NULL,
    started_at       timestamptz NOT NULL DEFAULT now(),
    -- lease_expires_at is the lease the claim took; renewals extend it on the turn's row only.
    lease_expires_at timestamptz NOT NULL,
    ended_at         timestamptz,
    -- outcome: succeeded, failed, cancelled, expired, retried or handed_off.
    outcome          text,
    error            text,
    -- upstream is the endpoint the attempt's last upstream request went to.
    upstream         text,
    -- events counts the events the attempt published (its terminal event included), waits its
    -- announced waits on its upstream.
    events           integer,
    waits            integer,
    PRIMARY KEY (turn_id, fencing_token)
) WITH (fillfactor = 90);

-- +goose Down
DROP TABLE turn_attempts;
