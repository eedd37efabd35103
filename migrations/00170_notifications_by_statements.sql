-- +goose Up
-- A turn's webhook, push configs and task are written by the statements of pkg/turnstore that
-- write the turn (its queued row, its claim, its expiry), from the envelope's own fields
-- (wire.Envelope.Webhook, PushConfigs) and the task its metadata names (turnstore.TaskOf), no
-- longer by triggers reading reserved metadata keys; retention deletes a turn's notifications and
-- its task's configs in its own statement. The one trigger left is turns_outbox: every status
-- change, whichever statement makes it, writes its notifications in that statement.
--
-- turns.task_id is the task a follow-up turn belongs to (NULL: the turn is its own task), set
-- here for the rows written before from the metadata, as turn_task_id read it.
--
-- Upgrade with the previous version's intake and workers stopped, not replica by replica: they
-- write the reserved keys into the metadata and rely on the triggers dropped here, so a turn one
-- of them writes after this migration would keep the keys in its metadata and owe no
-- notification. Records of the previous format still in Kafka are safe: the new workers take the
-- keys out of the metadata into the envelope's fields as they decode them (wire.DecodeEnvelope).
ALTER TABLE turns ADD COLUMN task_id uuid;
UPDATE turns SET task_id = turn_task_id(metadata, turn_id)
WHERE jsonb_typeof(metadata) = 'object' AND metadata ? 'a2a' AND turn_task_id(metadata, turn_id) <> turn_id;

DROP TRIGGER turns_take_webhook ON turns;
DROP FUNCTION turns_take_webhook();
DROP TRIGGER turns_strip_webhook ON turns;
DROP FUNCTION turns_strip_webhook();
DROP TRIGGER turns_drop_notifications ON turns;
DROP FUNCTION turns_drop_notifications();

-- The outbox as 00150 wrote it, with the task read from turns.task_id.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION turns_outbox() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    task uuid;
    snapshot jsonb;
BEGIN
    -- A turn's notifications start at its claim: intake's queued row (written in the background
    -- after Kafka acknowledged the turn, and not at all when the claim got there first) is not a
    -- state change the client has not already been told of by the 202.
    IF (TG_OP = 'INSERT' AND NEW.status = 'queued')
        OR (TG_OP = 'UPDATE' AND NEW.status = OLD.status AND NEW.attempt = OLD.attempt) THEN
        RETURN NULL;
    END IF;
    IF NEW.webhook_url IS NOT NULL THEN
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
    END IF;
    task := coalesce(NEW.task_id, NEW.turn_id);
    IF NOT EXISTS (SELECT 1 FROM task_push_configs WHERE task_id = task AND tenant = NEW.tenant) THEN
        RETURN NULL;
    END IF;
    SELECT jsonb_agg(jsonb_strip_nulls(jsonb_build_object(
            'turn_id', coalesce(t.client_turn_id, t.turn_id),
            'session_id', substr(t.session_id, position('/' in t.session_id) + 1),
            'status', t.status,
            'attempts', t.attempt,
            'input', t.input,
            'output', t.output,
            'metadata', CASE WHEN jsonb_typeof(t.metadata) = 'object' AND t.metadata ? 'a2a'
                THEN jsonb_build_object('a2a', t.metadata->'a2a') END,
            'error', t.error,
            'accepted_at', t.accepted_at,
            'started_at', t.started_at,
            'finished_at', t.finished_at)) ORDER BY t.accepted_at, t.turn_id)
    INTO snapshot
    FROM turns t
    WHERE t.session_id = NEW.session_id AND t.tenant = NEW.tenant
      AND (t.turn_id = task OR t.task_id = task);
    INSERT INTO turn_notifications (turn_id, tenant, url, token, status, payload, format, config_id, auth_header)
    SELECT task, NEW.tenant, c.url, c.token, NEW.status, jsonb_build_object('turns', snapshot), 'a2a', c.config_id,
        CASE WHEN c.auth_credentials IS NULL THEN NULL
             WHEN EXISTS (SELECT 1 FROM unnest(c.auth_schemes) s WHERE lower(s) = 'bearer') THEN 'Bearer ' || c.auth_credentials
             WHEN EXISTS (SELECT 1 FROM unnest(c.auth_schemes) s WHERE lower(s) = 'basic') THEN 'Basic ' || c.auth_credentials
        END
    FROM task_push_configs c
    WHERE c.task_id = task AND c.tenant = NEW.tenant
    ORDER BY c.created_at, c.config_id;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

DROP FUNCTION turn_task_id(jsonb, uuid);

-- +goose Down
-- Back to 00150's functions and triggers; the webhooks and configs already stored stay.
-- +goose StatementBegin
CREATE FUNCTION turn_task_id(md jsonb, id uuid) RETURNS uuid LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN jsonb_typeof(md) = 'object' AND jsonb_typeof(md->'a2a') = 'object'
        AND (md->'a2a'->>'task_id') ~* '^([a-z][a-z0-9]{1,7}-)?[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
        THEN right(md->'a2a'->>'task_id', 36)::uuid ELSE id END
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION turns_outbox() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    task uuid;
    snapshot jsonb;
BEGIN
    -- A turn's notifications start at its claim: intake's queued row (written in the background
    -- after Kafka acknowledged the turn, and not at all when the claim got there first) is not a
    -- state change the client has not already been told of by the 202.
    IF (TG_OP = 'INSERT' AND NEW.status = 'queued')
        OR (TG_OP = 'UPDATE' AND NEW.status = OLD.status AND NEW.attempt = OLD.attempt) THEN
        RETURN NULL;
    END IF;
    IF NEW.webhook_url IS NOT NULL THEN
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
    END IF;
    task := turn_task_id(NEW.metadata, NEW.turn_id);
    IF NOT EXISTS (SELECT 1 FROM task_push_configs WHERE task_id = task AND tenant = NEW.tenant) THEN
        RETURN NULL;
    END IF;
    SELECT jsonb_agg(jsonb_strip_nulls(jsonb_build_object(
            'turn_id', coalesce(t.client_turn_id, t.turn_id),
            'session_id', substr(t.session_id, position('/' in t.session_id) + 1),
            'status', t.status,
            'attempts', t.attempt,
            'input', t.input,
            'output', t.output,
            'metadata', CASE WHEN jsonb_typeof(t.metadata) = 'object' AND t.metadata ? 'a2a'
                THEN jsonb_build_object('a2a', t.metadata->'a2a') END,
            'error', t.error,
            'accepted_at', t.accepted_at,
            'started_at', t.started_at,
            'finished_at', t.finished_at)) ORDER BY t.accepted_at, t.turn_id)
    INTO snapshot
    FROM turns t
    WHERE t.session_id = NEW.session_id AND t.tenant = NEW.tenant
      AND (t.turn_id = task OR turn_task_id(t.metadata, t.turn_id) = task);
    INSERT INTO turn_notifications (turn_id, tenant, url, token, status, payload, format, config_id, auth_header)
    SELECT task, NEW.tenant, c.url, c.token, NEW.status, jsonb_build_object('turns', snapshot), 'a2a', c.config_id,
        CASE WHEN c.auth_credentials IS NULL THEN NULL
             WHEN EXISTS (SELECT 1 FROM unnest(c.auth_schemes) s WHERE lower(s) = 'bearer') THEN 'Bearer ' || c.auth_credentials
             WHEN EXISTS (SELECT 1 FROM unnest(c.auth_schemes) s WHERE lower(s) = 'basic') THEN 'Basic ' || c.auth_credentials
        END
    FROM task_push_configs c
    WHERE c.task_id = task AND c.tenant = NEW.tenant
    ORDER BY c.created_at, c.config_id;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
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
    IF NEW.metadata IS NOT NULL AND jsonb_typeof(NEW.metadata) = 'object'
        AND jsonb_typeof(NEW.metadata->'turnstile.push_configs') = 'array' THEN
        INSERT INTO task_push_configs (task_id, config_id, tenant, url, token, auth_schemes, auth_credentials)
        SELECT turn_task_id(NEW.metadata, NEW.turn_id), c->>'id', NEW.tenant, c->>'url', c->>'token',
            coalesce(ARRAY(SELECT jsonb_array_elements_text(CASE WHEN jsonb_typeof(c->'auth_schemes') = 'array'
                THEN c->'auth_schemes' ELSE '[]' END)), '{}'), c->>'auth_credentials'
        FROM jsonb_array_elements(NEW.metadata->'turnstile.push_configs') c
        WHERE jsonb_typeof(c) = 'object' AND c->>'id' IS NOT NULL AND c->>'url' IS NOT NULL
        ON CONFLICT (task_id, config_id) DO NOTHING;
        IF TG_OP = 'UPDATE' THEN
            NEW.metadata := NEW.metadata - 'turnstile.push_configs';
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
    UPDATE turns SET metadata = metadata - 'turnstile.webhook' - 'turnstile.push_configs' WHERE turn_id = NEW.turn_id;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER turns_strip_webhook
    AFTER INSERT ON turns
    FOR EACH ROW WHEN (jsonb_typeof(NEW.metadata) = 'object'
        AND (NEW.metadata ? 'turnstile.webhook' OR NEW.metadata ? 'turnstile.push_configs'))
    EXECUTE FUNCTION turns_strip_webhook();

-- +goose StatementBegin
CREATE FUNCTION turns_drop_notifications() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM turn_notifications WHERE turn_id = OLD.turn_id;
    DELETE FROM task_push_configs WHERE task_id = OLD.turn_id AND tenant = OLD.tenant;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER turns_drop_notifications
    AFTER DELETE ON turns
    FOR EACH ROW EXECUTE FUNCTION turns_drop_notifications();

ALTER TABLE turns DROP COLUMN task_id;
