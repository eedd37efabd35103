-- +goose Up
-- A queued row holds everything its Kafka record holds (the input and metadata were already
-- columns; the multitask strategy and the trace context are added here), so a turn whose record
-- can no longer be consumed is produced again from Postgres (intake's re-driver). kafka_topic_id
-- names the incarnation of the topic its record went to: a recreated topic, or a restarted
-- embedded broker, has a new ID, and the partition and offset of a record in the old one mean
-- nothing in the new one. NULL where intake did not know it (the row is then judged by age).
-- redrives counts how many times the turn's record was produced again, redriven_at when it last
-- was (a re-driver takes a row by setting it, so two intake replicas do not both re-drive it).
ALTER TABLE turns
    ADD COLUMN multitask text,
    ADD COLUMN traceparent text,
    ADD COLUMN kafka_topic_id uuid,
    ADD COLUMN redrives integer NOT NULL DEFAULT 0,
    ADD COLUMN redriven_at timestamptz;

-- The claim refuses a turn while an earlier accepted turn of its session is not terminal
-- (pkg/turnstore claim.sql): one probe of this index per claimed turn, however long the session's
-- history.
CREATE INDEX turns_live_session_idx ON turns (session_id, accepted_at) WHERE status IN ('queued', 'running');

-- +goose Down
DROP INDEX turns_live_session_idx;
ALTER TABLE turns
    DROP COLUMN redriven_at,
    DROP COLUMN redrives,
    DROP COLUMN kafka_topic_id,
    DROP COLUMN traceparent,
    DROP COLUMN multitask;
