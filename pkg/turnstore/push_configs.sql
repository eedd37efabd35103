-- The push configs of the turns of CTE notify (turn_id, tenant, push_configs, task_id) stored with
-- their tasks (Notifications).
    INSERT INTO task_push_configs (task_id, config_id, tenant, url, token, auth_schemes, auth_credentials)
    SELECT coalesce(r.task_id, r.turn_id), c.id, r.tenant, c.url, c.token, coalesce(c.auth_schemes, '{}'), c.auth_credentials
    FROM notify r CROSS JOIN LATERAL jsonb_to_recordset(r.push_configs)
        AS c(id text, url text, token text, auth_schemes text[], auth_credentials text)
    WHERE r.push_configs IS NOT NULL
    ON CONFLICT (task_id, config_id) DO NOTHING
