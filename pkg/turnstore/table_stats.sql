SELECT c.relname,
    current_setting('autovacuum')::boolean
        AND coalesce((SELECT option_value::boolean FROM pg_options_to_table(c.reloptions)
                      WHERE option_name = 'autovacuum_enabled'), true),
    pg_has_role(current_user, c.relowner, 'USAGE')
        OR coalesce((SELECT rolsuper FROM pg_roles WHERE rolname = current_user), false),
    coalesce(s.n_live_tup, 0), coalesce(s.n_dead_tup, 0)
FROM pg_class c
LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
WHERE c.oid = ANY(ARRAY(SELECT to_regclass(t) FROM unnest($1::text[]) AS t))
