, s AS (
    INSERT INTO sessions (session_id, tenant)
    SELECT DISTINCT ON (session_id) session_id, tenant FROM rows WHERE need_session
    ORDER BY session_id, accepted_at
    ON CONFLICT (session_id) DO NOTHING
)
