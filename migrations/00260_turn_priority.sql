-- +goose Up
-- A turn's priority (wire.Envelope.Priority, 0 to 9, higher first), written by intake with the
-- queued row; NULL for a row written before turns had priorities, which is the default (5). The
-- worker orders by the record's header, not by this column: it is for operators reading a turn.
ALTER TABLE turns ADD COLUMN priority smallint;

-- +goose Down
ALTER TABLE turns DROP COLUMN priority;
