-- +goose Up
-- Push notifications (issue 23) from a transactional outbox. A turn registered with a webhook
-- carries it in its metadata under the reserved key "turnstile.webhook" ({url, token}) from intake
-- through Kafka to the claim; the triggers below move it out of the metadata into the turn's own
-- columns (so the token never shows in the turn view), and turns_outbox writes one outbox
-- row for every status the turn takes while it has a webhook. Both run inside the statement that
-- changes the status (claim, completion, failure, cancel, expiry, input-required completion), so a
-- state change without its notification cannot exist, whichever SQL made it: the statements in
-- pkg/turnstore stay as they are.
ALTER TABLE turns ADD COLUMN webhook_url text, ADD COLUMN webhook_token text;

-- One row per (turn, status change) owed to the turn's webhook. id orders a turn's rows; the
-- notifier delivers a turn's oldest open row only (per task in order) and claims it with a lease
-- and a fencing token from the turns' sequence, so a stale claimant cannot settle it.
CREATE TABLE turn_notifications (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    turn_id          uuid NOT NULL,
    tenant           text NOT NULL,
    url              text NOT NULL,
    token            text,
    status           text NOT NULL,
    payload          jsonb NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    due_at           timestamptz NOT NULL DEFAULT now(),
    attempts         integer NOT NULL DEFAULT 0,
    fencing_token    bigint NOT NULL DEFAULT 0,
    lease_owner      text,
    lease_expires_at timestamptz,
    delivered_at     timestamptz,
    dead_at          timestamptz,
    last_error       text
);
-- The open rows, for the claim and the outbox age.
CREATE INDEX turn_notifications_open_idx ON turn_notifications (turn_id, id)
    WHERE delivered_at IS NULL AND dead_at IS NULL;
CREATE INDEX turn_notifications_turn_idx ON turn_notifications (turn_id);

-- The claim inserts a turn with ON CONFLICT DO UPDATE SET metadata = EXCLUDED.metadata, and
-- EXCLUDED is the row as the BEFORE INSERT triggers left it: so on insert the webhook is copied into
-- the columns but stays in the metadata (the update path needs it there), and an AFTER INSERT
-- trigger strips it once the statement inserted the row; on update it is moved at once.
-- +goose StatementBegin
CREATE FUNCTION turns_take_webhook() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.metadata IS NOT NULL AND jsonb_typeof(NEW.metadata) = 'object' AND NEW.metadata ? 'turnstile.webhook' THEN
        NEW.webhook_url := NEW.metadata->'turnstile.webhook'->>'url';
        NEW.webhook_token := NEW.metadata->'turnstile.webhook'->>'token';
        IF TG_OP = 'UPDATE' THEN
            NEW.metadata := NEW.metadata - 'turnstile.webhook';
        END IF;
    END IF;
    RETURN NEW;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER turns_take_webhook
    BEFORE INSERT OR UPDATE OF metadata ON turns
    FOR EACH ROW EXECUTE FUNCTION turns_take_webhook();

-- +goose StatementBegin
CREATE FUNCTION turns_strip_webhook() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE turns SET metadata = metadata - 'turnstile.webhook' WHERE turn_id = NEW.turn_id;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER turns_strip_webhook
    AFTER INSERT ON turns
    FOR EACH ROW WHEN (jsonb_typeof(NEW.metadata) = 'object' AND NEW.metadata ? 'turnstile.webhook')
    EXECUTE FUNCTION turns_strip_webhook();

-- +goose StatementBegin
CREATE FUNCTION turns_outbox() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- A turn's notifications start at its claim: intake's queued row (written in the background
    -- after Kafka acknowledged the turn, and not at all when the claim got there first) is not a
    -- state change the client has not already been told of by the 202.
    IF NEW.webhook_url IS NULL
        OR (TG_OP = 'INSERT' AND NEW.status = 'queued')
        OR (TG_OP = 'UPDATE' AND NEW.status = OLD.status AND NEW.attempt = OLD.attempt) THEN
        RETURN NULL;
    END IF;
    INSERT INTO turn_notifications (turn_id, tenant, url, token, status, payload)
    VALUES (NEW.turn_id, NEW.tenant, NEW.webhook_url, NEW.webhook_token, NEW.status, jsonb_strip_nulls(jsonb_build_object(
        'turn_id', coalesce(NEW.client_turn_id, NEW.turn_id),
        'session_id', substr(NEW.session_id, position('/' in NEW.session_id) + 1),
        'status', NEW.status,
        'attempt', NEW.attempt,
        'output', NEW.output,
        'error', NEW.error,
        'accepted_at', NEW.accepted_at,
        'started_at', NEW.started_at,
        'finished_at', NEW.finished_at,
        'updated_at', NEW.updated_at)));
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER turns_outbox
    AFTER INSERT OR UPDATE OF status, attempt ON turns
    FOR EACH ROW EXECUTE FUNCTION turns_outbox();

-- Retention deletes a turn's notifications with it (services/worker/internal/retention deletes
-- turns only): a trigger, so no statement that deletes turns can leave them behind.
-- +goose StatementBegin
CREATE FUNCTION turns_drop_notifications() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM turn_notifications WHERE turn_id = OLD.turn_id;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER turns_drop_notifications
    AFTER DELETE ON turns
    FOR EACH ROW WHEN (OLD.webhook_url IS NOT NULL)
    EXECUTE FUNCTION turns_drop_notifications();

-- +goose Down
DROP TRIGGER turns_drop_notifications ON turns;
DROP FUNCTION turns_drop_notifications();
DROP TRIGGER turns_outbox ON turns;
DROP FUNCTION turns_outbox();
DROP TRIGGER turns_strip_webhook ON turns;
DROP FUNCTION turns_strip_webhook();
DROP TRIGGER turns_take_webhook ON turns;
DROP FUNCTION turns_take_webhook();
DROP TABLE turn_notifications;
ALTER TABLE turns DROP COLUMN webhook_token, DROP COLUMN webhook_url;
