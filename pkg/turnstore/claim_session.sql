WITH ins AS (
    INSERT INTO sessions (session_id, tenant) VALUES ($1, $2)
    ON CONFLICT (session_id) DO NOTHING RETURNING tenant
)
SELECT tenant FROM ins UNION ALL SELECT tenant FROM sessions WHERE session_id = $1 LIMIT 1
