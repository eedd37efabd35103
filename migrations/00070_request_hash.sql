-- +goose Up
-- request_hash identifies the request of a turn posted with an Idempotency-Key (or a client-minted
-- turn_id): SHA-256 of the session ID and the request body. The first row written for the turn
-- keeps it — intake's queued row, or a worker's claim when the claim came first. Intake answers a
-- retry whose hash differs with 422, and a worker's claim refuses a Kafka record whose hash differs
-- (that request was refused, its record is inert). NULL for turns posted without a key. Adding a
-- nullable column without a default rewrites nothing.
ALTER TABLE turns ADD COLUMN request_hash bytea;

-- +goose Down
ALTER TABLE turns DROP COLUMN request_hash;
