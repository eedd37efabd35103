-- +goose Up
-- A2A push-notification configurations (issue 23). A config belongs to a task: the task's first
-- turn (its ID is the task ID) and the follow-up turns whose metadata names it
-- ({"a2a": {"task_id": ...}}, services/a2a). It applies to every status change of every turn of
-- the task until it is deleted or retention deletes the task's first turn. Several per task.
CREATE TABLE task_push_configs (
    task_id          uuid NOT NULL,
    config_id        text NOT NULL,
    tenant           text NOT NULL,
    url              text NOT NULL,
    token            text,
    auth_schemes     text[] NOT NULL DEFAULT '{}',
    auth_credentials text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task_id, config_id)
);

-- A config's notifications: format 'a2a' rows hold the task's turns as they were at the change
-- (payload {"turns": [...]}) and are rendered as the A2A Task by the notifier; their turn_id is
-- the task ID, so a task's notifications are claimed in order across its turns. auth_header is
-- the Authorization the config's authentication asks for.
ALTER TABLE turn_notifications
    ADD COLUMN format text NOT NULL DEFAULT 'native',
    ADD COLUMN config_id text,
    ADD COLUMN auth_header text;
-- The dead letters, counted every few seconds by the notifier (without reading delivered rows).
CREATE INDEX turn_notifications_dead_idx ON turn_notifications (id) WHERE dead_at IS NOT NULL;

-- turn_task_id is the task a turn belongs to: the one its metadata names (a follow-up), else its
-- own ID. The name may carry its region's prefix ("euw1-<uuid>", pkg/region); the stored ID is
-- the bare UUID. A malformed name is ignored rather than failing the statement that changes the
-- turn.
-- +goose StatementBegin
CREATE FUNCTION turn_task_id(md jsonb, id uuid) RETURNS uuid LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN jsonb_typeof(md) = 'object' AND jsonb_typeof(md->'a2a') = 'object'
        AND (md->'a2a'->>'task_id') ~* '^([a-z][a-z0-9]{1,7}-)?[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
        THEN right(md->'a2a'->>'task_id', 36)::uuid ELSE id END
$$;
-- +goose StatementEnd

-- Configs sent with a message (configuration.pushNotificationConfig) travel in the turn's metadata
-- under the reserved key "turnstile.push_configs" from intake through Kafka, like the native
-- webhook; the first statement that writes the turn (intake's queued row or the claim) stores
-- them with the task before the status change that owes them a notification, and the key is
-- taken out of the metadata as the webhook is. A config already stored is kept as it is.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION turns_take_webhook() RETURNS trigger LANGUAGE plpgsql AS $$
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

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION turns_strip_webhook() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE turns SET metadata = metadata - 'turnstile.webhook' - 'turnstile.push_configs' WHERE turn_id = NEW.turn_id;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

DROP TRIGGER turns_strip_webhook ON turns;
CREATE TRIGGER turns_strip_webhook
    AFTER INSERT ON turns
    FOR EACH ROW WHEN (jsonb_typeof(NEW.metadata) = 'object'
        AND (NEW.metadata ? 'turnstile.webhook' OR NEW.metadata ? 'turnstile.push_configs'))
    EXECUTE FUNCTION turns_strip_webhook();

-- The outbox: the native webhook's row as before, and one 'a2a' row per config of the turn's task,
-- in the configs' order, holding the task's turns of the tenant's session as they are now (the
-- changed one included: an AFTER trigger sees its statement's rows). Only the turns' own fields
-- the A2A rendering reads are copied: never the reserved keys (tokens, credentials).
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

-- Retention deletes a task's configs with its first turn, and every turn's notifications (an A2A
-- task's are filed under its first turn) with the turn.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION turns_drop_notifications() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM turn_notifications WHERE turn_id = OLD.turn_id;
    DELETE FROM task_push_configs WHERE task_id = OLD.turn_id AND tenant = OLD.tenant;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

DROP TRIGGER turns_drop_notifications ON turns;
CREATE TRIGGER turns_drop_notifications
    AFTER DELETE ON turns
    FOR EACH ROW EXECUTE FUNCTION turns_drop_notifications();

-- +goose Down
-- Back to 00140's triggers and functions.
DROP TRIGGER turns_drop_notifications ON turns;
CREATE TRIGGER turns_drop_notifications
    AFTER DELETE ON turns
    FOR EACH ROW WHEN (OLD.webhook_url IS NOT NULL)
    EXECUTE FUNCTION turns_drop_notifications();
DROP TRIGGER turns_strip_webhook ON turns;
CREATE TRIGGER turns_strip_webhook
    AFTER INSERT ON turns
    FOR EACH ROW WHEN (jsonb_typeof(NEW.metadata) = 'object' AND NEW.metadata ? 'turnstile.webhook')
    EXECUTE FUNCTION turns_strip_webhook();
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION turns_drop_notifications() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM turn_notifications WHERE turn_id = OLD.turn_id;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION turns_strip_webhook() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE turns SET metadata = metadata - 'turnstile.webhook' WHERE turn_id = NEW.turn_id;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION turns_take_webhook() RETURNS trigger LANGUAGE plpgsql AS $$
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
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION turns_outbox() RETURNS trigger LANGUAGE plpgsql AS $$
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
DROP FUNCTION turn_task_id(jsonb, uuid);
DROP INDEX turn_notifications_dead_idx;
ALTER TABLE turn_notifications DROP COLUMN auth_header, DROP COLUMN config_id, DROP COLUMN format;
DROP TABLE task_push_configs;
