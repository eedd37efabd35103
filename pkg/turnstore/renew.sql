WITH req AS MATERIALIZED (
    SELECT * FROM unnest($1::uuid[], $2::bigint[]) AS r(turn_id, token)
), held AS MATERIALIZED (
-- include: locked_turns.sql
)
UPDATE turns t SET lease_expires_at = now() + $3 * interval '1 millisecond', updated_at = now()
FROM held h WHERE t.turn_id = h.turn_id AND t.lease_owner IS NOT NULL
RETURNING t.turn_id, t.cancel_requested
