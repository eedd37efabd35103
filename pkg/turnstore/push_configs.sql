-- The push configs of the turns of CTE notify (turn_id, tenant, push_configs, task_id) stored with
-- their tasks (Notifications). The trigger on task_push_configs bounds a task's configs
-- (TURNSTILE_PUSH_CONFIGS_MAX, migration 00180): it locks each task before counting its configs,
-- and a config past the bound is skipped. Rows come in task order, so two statements that store
-- configs of the same tasks take those locks in the same order.
    INSERT INTO task_push_configs (task_id, config_id, tenant, url, token, auth_schemes, auth_credentials, a2a_version)
    SELECT coalesce(r.task_id, r.turn_id), c.id, r.tenant, c.url, c.token, coalesce(c.auth_schemes, '{}'), c.auth_credentials,
        coalesce(c.a2a_version, '0.3')
    FROM notify r CROSS JOIN LATERAL jsonb_to_recordset(r.push_configs)
        AS c(id text, url text, token text, auth_schemes text[], auth_credentials text, a2a_version text)
    WHERE r.push_configs IS NOT NULL
    ORDER BY coalesce(r.task_id, r.turn_id)
    ON CONFLICT (task_id, config_id) DO NOTHING
