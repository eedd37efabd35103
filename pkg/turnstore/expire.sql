WITH notify AS (
    SELECT $1::uuid AS turn_id, $3::text AS tenant, ($13::jsonb[])[1] AS push_configs, ($14::uuid[])[1] AS task_id
), configs AS (
-- include: push_configs.sql
)
INSERT INTO turns AS t (turn_id, session_id, tenant, status, fencing_token, input, metadata, accepted_at,
    deadline, finished_at, error, kafka_partition, kafka_offset, webhook_url, webhook_token, task_id)
VALUES ($1, $2, $3, 'expired', nextval('fencing_token_seq'), jsonb_build_object('text', $4::text), $5, $6, $7, now(), $8, $9, $10,
    ($11::text[])[1], ($12::text[])[1], ($14::uuid[])[1])
ON CONFLICT (turn_id) DO UPDATE SET status = 'expired', error = EXCLUDED.error, finished_at = now(),
    fencing_token = nextval('fencing_token_seq'), lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
WHERE NOT t.cancel_requested
  AND (t.status = 'queued' OR (t.status = 'running' AND t.lease_expires_at < now()))
RETURNING t.fencing_token, t.attempt
