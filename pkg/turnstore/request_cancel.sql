INSERT INTO turns AS t (turn_id, session_id, tenant, status, cancel_requested, fencing_token, error,
    accepted_at, finished_at)
VALUES ($1, $2, $3, 'cancelled', true, nextval('fencing_token_seq'), $4, now(), now())
ON CONFLICT (turn_id) DO UPDATE SET
    cancel_requested = true,
    status = CASE WHEN t.status = 'queued' THEN 'cancelled' ELSE t.status END,
    error = CASE WHEN t.status = 'queued' THEN $4 ELSE t.error END,
    finished_at = CASE WHEN t.status = 'queued' THEN now() ELSE t.finished_at END,
    fencing_token = CASE WHEN t.status = 'queued' THEN nextval('fencing_token_seq') ELSE t.fencing_token END,
    updated_at = now()
WHERE t.status IN ('queued', 'running')
RETURNING t.status, t.fencing_token, t.attempt, t.status = 'cancelled'
