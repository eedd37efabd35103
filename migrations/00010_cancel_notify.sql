-- +goose Up
-- A cancel request on a running turn notifies the workers at once (LISTEN/NOTIFY), so the turn's
-- context is cancelled in milliseconds instead of at the next lease renewal. The channel is named
-- after the table's schema, so stacks sharing one database (a schema each) do not hear each other.
-- Renewal still reports cancel flags: a notification lost while a worker reconnects costs at most
-- one heartbeat.
-- +goose StatementBegin
CREATE FUNCTION turns_notify_cancel() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify(TG_TABLE_SCHEMA || '.turn_cancel', NEW.turn_id::text);
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER turns_cancel_requested
    AFTER UPDATE OF cancel_requested ON turns
    FOR EACH ROW
    WHEN (NEW.cancel_requested AND NOT OLD.cancel_requested AND NEW.status = 'running')
    EXECUTE FUNCTION turns_notify_cancel();

-- +goose Down
DROP TRIGGER turns_cancel_requested ON turns;
DROP FUNCTION turns_notify_cancel();
