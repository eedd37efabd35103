DELETE FROM sessions WHERE session_id IN (
    SELECT s.session_id FROM sessions s
    WHERE s.updated_at < now() - $1 * interval '1 millisecond'
      AND NOT EXISTS (SELECT 1 FROM turns t WHERE t.session_id = s.session_id)
    LIMIT $2
    FOR UPDATE SKIP LOCKED
)
