UPDATE turns t SET
    cancel_requested = true,
    status = CASE WHEN t.status = 'queued' THEN 'cancelled' ELSE t.status END,
    error = CASE WHEN t.status = 'queued' THEN $4 ELSE t.error END,
    finished_at = CASE WHEN t.status = 'queued' THEN now() ELSE t.finished_at END,
    fencing_token = CASE WHEN t.status = 'queued' THEN nextval('fencing_token_seq') ELSE t.fencing_token END,
    updated_at = now()
WHERE t.session_id = $1 AND t.status IN ('queued', 'running') AND t.turn_id <> $2 AND t.accepted_at <= $3
  AND NOT t.cancel_requested
RETURNING t.turn_id, t.session_id, t.client_turn_id, t.fencing_token, t.attempt, t.status = 'cancelled'
