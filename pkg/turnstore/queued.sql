WITH rows AS (
    SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::timestamptz[], $5::timestamptz[],
        $6::boolean[]) AS r(turn_id, session_id, tenant, accepted_at, deadline, need_session)
)
-- include: queued_sessions.sql
INSERT INTO turns (turn_id, session_id, tenant, status, accepted_at, deadline)
SELECT DISTINCT ON (turn_id) turn_id, session_id, tenant, 'queued', accepted_at, deadline
FROM rows ORDER BY turn_id, accepted_at
ON CONFLICT (turn_id) DO NOTHING
