WITH doomed AS (
    SELECT t.turn_id FROM turns t
    WHERE (t.status = 'queued' OR (t.status = 'running' AND t.lease_expires_at < now()))
      AND (t.cancel_requested OR t.deadline <= now())
    ORDER BY t.accepted_at
    LIMIT $1
    FOR UPDATE SKIP LOCKED
)
UPDATE turns t SET
    status = CASE WHEN t.cancel_requested THEN 'cancelled' ELSE 'expired' END,
    error = CASE WHEN t.cancel_requested THEN $2 ELSE $3 END,
    finished_at = now(), fencing_token = nextval('fencing_token_seq'), lease_owner = NULL,
    lease_expires_at = NULL, updated_at = now()
FROM doomed d WHERE t.turn_id = d.turn_id
RETURNING t.turn_id, t.session_id, t.client_turn_id, t.fencing_token, t.attempt, t.status, t.error
