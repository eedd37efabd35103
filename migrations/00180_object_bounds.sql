-- +goose Up
-- A task's push configs are bounded (TURNSTILE_PUSH_CONFIGS_MAX, default 10), whichever statement
-- writes them: intake's PUT (the native route and A2A's set), and the statements that write a
-- turn with the configs its message carried (pkg/turnstore, push_configs.sql). The trigger holds
-- the bound for all of them:
--
--   * it takes a transaction-scoped advisory lock named by the task, so the writers of one task
--     are serialised, and counts the task's other configs after the lock is granted (a PL/pgSQL
--     statement takes a new snapshot in READ COMMITTED, so it sees what the previous holder
--     committed; rows an earlier row of the same statement inserted are visible too);
--   * a new config past the bound is skipped (RETURN NULL), never raised: the statement that
--     claims a batch of turns must not fail for one turn's configs. Intake's PUT takes the same
--     lock and counts first, in its own transaction, to answer a refusal (409 push-configs-limit).
--
-- The bound is the session setting turnstile.push_configs_max, which every pool turnstile opens
-- sets from TURNSTILE_PUSH_CONFIGS_MAX (pkg/postgres); a connection without it gets 10. Replacing
-- a stored config (same id) is not a new config: the count leaves out NEW's own id.
-- +goose StatementBegin
CREATE FUNCTION task_push_configs_bound() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    most int := coalesce(nullif(current_setting('turnstile.push_configs_max', true), '')::int, 10);
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('task_push_configs:' || NEW.task_id::text, 0));
    IF (SELECT count(*) FROM task_push_configs
        WHERE task_id = NEW.task_id AND tenant = NEW.tenant AND config_id <> NEW.config_id) >= most THEN
        RETURN NULL;
    END IF;
    RETURN NEW;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER task_push_configs_bound
    BEFORE INSERT ON task_push_configs
    FOR EACH ROW EXECUTE FUNCTION task_push_configs_bound();

-- +goose Down
DROP TRIGGER task_push_configs_bound ON task_push_configs;
DROP FUNCTION task_push_configs_bound();
