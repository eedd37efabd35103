-- +goose Up
-- dead_letter_reason is set, in the same fenced statement that fails a poison turn, to the reason it
-- must be copied to the dead-letter topic, and cleared once the copy is acknowledged. A worker that
-- dies in between leaves it set; the redelivered record finds the turn finished (DONE) and writes the
-- dead letter then, so the dead-letter topic is at-least-once, never lossy.
ALTER TABLE turns ADD COLUMN dead_letter_reason text;

-- +goose Down
ALTER TABLE turns DROP COLUMN dead_letter_reason;
