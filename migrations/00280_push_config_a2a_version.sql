-- +goose Up
-- An A2A push config remembers the protocol version it was created in (a2a_version: '0.3', or
-- '1.0' for a config created through A2A 1.0, either binding), and its notifications are rendered
-- in that version: format 'a2a' rows as the 0.3 Task, 'a2a-1.0' rows as 1.0's StreamResponse
-- carrying the Task (A2A 1.0, section 4.3.3; services/notifier). Configs stored before are 0.3's,
-- as they were created through 0.3. Notifiers must run this version before a 1.0 config is
-- created: an older one would send an 'a2a-1.0' row's payload as it is.
ALTER TABLE task_push_configs ADD COLUMN a2a_version text NOT NULL DEFAULT '0.3'
    CHECK (a2a_version IN ('0.3', '1.0'));

-- The outbox as 00190 wrote it, with each config's rows in its version's format.
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
            'session_id', turnstile_session_id(NEW.session_id),
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
            'session_id', turnstile_session_id(t.session_id),
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
    SELECT task, NEW.tenant, c.url, c.token, NEW.status, jsonb_build_object('turns', snapshot),
        CASE c.a2a_version WHEN '1.0' THEN 'a2a-1.0' ELSE 'a2a' END, c.config_id,
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

-- +goose Down
-- Back to 00190's outbox; a 1.0 config's notifications still open are sent as 0.3's.
UPDATE turn_notifications SET format = 'a2a' WHERE format = 'a2a-1.0';
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
            'session_id', turnstile_session_id(NEW.session_id),
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
            'session_id', turnstile_session_id(t.session_id),
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
ALTER TABLE task_push_configs DROP COLUMN a2a_version;
