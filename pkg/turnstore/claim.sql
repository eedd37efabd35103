WITH req AS (
    SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::jsonb[], $6::timestamptz[],
        $7::timestamptz[], $8::integer[], $9::bigint[], $13::uuid[], $14::text[], $15::text[], $16::jsonb[], $17::uuid[], $18::text[], $20::smallint[])
        AS r(turn_id, session_id, tenant, input_text, metadata, accepted_at, deadline, kpart, koff, client_turn_id,
            webhook_url, webhook_token, push_configs, task_id, agent, priority)
), blocked AS (
    -- Requests that must not start yet, whatever the consumer holds in memory (per-session order).
    -- A turn that has started holds its session until it is terminal: two posts of a session in
    -- flight at once have no order of their own, and an earlier accepted turn whose queued row
    -- appeared only after a later one started waits behind it. Among turns that have not started,
    -- or (left from before) that both have, the earlier accepted goes first. So a request is blocked
    -- by a live turn of its session that has started while the request has not, or that is as
    -- started as the request and was accepted earlier. One probe of the partial index of live turns,
    -- and one of the request's own row, per request; a turn's own row is not its blocker.
    SELECT r.turn_id FROM req r
    CROSS JOIN LATERAL (
        SELECT coalesce((SELECT o.started_at IS NOT NULL FROM turns o WHERE o.turn_id = r.turn_id), false) AS started
    ) own
    WHERE EXISTS (
        SELECT 1 FROM turns e
        WHERE e.session_id = r.session_id AND e.status IN ('queued', 'running') AND e.turn_id <> r.turn_id
          AND ((e.started_at IS NOT NULL AND NOT own.started)
            OR ((e.started_at IS NOT NULL) = own.started AND e.accepted_at < r.accepted_at))
    )
), pauses AS MATERIALIZED (
    -- The queue pauses (migration 00270) of this claim's agent ($19, the lane's: every request of
    -- a claim is of one agent), or of every agent, by tenant ('' for every tenant). The table is a
    -- page or two, read once per statement; each request then probes a hash of it.
    SELECT q.tenant FROM queue_pauses q WHERE q.agent = '' OR q.agent = $19
), paused AS (
    -- Requests a queue pause covers: they do not start, taken over or not; running turns finish.
    SELECT r.turn_id FROM req r
    WHERE r.turn_id NOT IN (SELECT b.turn_id FROM blocked b)
      AND (r.tenant IN (SELECT p.tenant FROM pauses p) OR '' IN (SELECT p.tenant FROM pauses p))
), held AS (
    -- A paused turn's row is written queued if it has none yet, so the session's later turns stay
    -- behind it (blocked) while it waits, and the backlog knows it is paused rather than waiting.
    INSERT INTO turns AS t (turn_id, session_id, tenant, status, input, metadata, accepted_at, deadline,
        kafka_partition, kafka_offset, client_turn_id, webhook_url, webhook_token, task_id, agent, priority)
    SELECT r.turn_id, r.session_id, r.tenant, 'queued', jsonb_build_object('text', r.input_text), r.metadata,
        r.accepted_at, r.deadline, r.kpart, r.koff, r.client_turn_id, r.webhook_url, r.webhook_token, r.task_id,
        NULLIF(r.agent, ''), r.priority
    FROM req r WHERE r.turn_id IN (SELECT p.turn_id FROM paused p) ORDER BY r.turn_id
    ON CONFLICT (turn_id) DO NOTHING
), notify AS (
    -- The push configs of the requests the claim may insert (not those blocked), stored before
    -- the outbox trigger of the insert or take-over below runs.
    SELECT r.turn_id, r.tenant, r.push_configs, r.task_id FROM req r
    WHERE r.push_configs IS NOT NULL AND r.turn_id NOT IN (SELECT b.turn_id FROM blocked b)
), configs AS (
-- include: push_configs.sql
), claimed AS (
    INSERT INTO turns AS t (turn_id, session_id, tenant, status, attempt, fencing_token, lease_owner,
        lease_expires_at, input, metadata, accepted_at, deadline, started_at, kafka_partition, kafka_offset,
        client_turn_id, webhook_url, webhook_token, task_id, agent, priority)
    SELECT r.turn_id, r.session_id, r.tenant, 'running', 1, nextval('fencing_token_seq'), $10,
        now() + $11 * interval '1 millisecond', jsonb_build_object('text', r.input_text), r.metadata, r.accepted_at,
        r.deadline, clock_timestamp(), r.kpart, r.koff, r.client_turn_id, r.webhook_url, r.webhook_token, r.task_id, NULLIF(r.agent, ''),
        r.priority
    FROM req r WHERE r.turn_id NOT IN (SELECT b.turn_id FROM blocked b) AND r.turn_id NOT IN (SELECT p.turn_id FROM paused p)
    ORDER BY r.turn_id
    ON CONFLICT (turn_id) DO UPDATE SET
        status = 'running',
        attempt = t.attempt + 1,
        fencing_token = nextval('fencing_token_seq'),
        lease_owner = EXCLUDED.lease_owner,
        lease_expires_at = EXCLUDED.lease_expires_at,
        input = EXCLUDED.input,
        metadata = EXCLUDED.metadata,
        deadline = EXCLUDED.deadline,
        -- clock_timestamp, not now(): a claim that waited on a lock held by the completion of the
        -- session's previous turn must not record a start before that turn's finish.
        started_at = coalesce(t.started_at, clock_timestamp()),
        -- A claim that writes the row before intake's queued row still records the priority.
        priority = coalesce(t.priority, EXCLUDED.priority),
        kafka_partition = EXCLUDED.kafka_partition,
        kafka_offset = EXCLUDED.kafka_offset,
        client_turn_id = coalesce(t.client_turn_id, EXCLUDED.client_turn_id),
        webhook_url = coalesce(EXCLUDED.webhook_url, t.webhook_url),
        webhook_token = CASE WHEN EXCLUDED.webhook_url IS NULL THEN t.webhook_token ELSE EXCLUDED.webhook_token END,
        task_id = EXCLUDED.task_id,
        updated_at = now()
    WHERE NOT t.cancel_requested
      AND t.attempt - t.handoffs < $12
      AND (t.status = 'queued' OR (t.status = 'running' AND t.lease_expires_at < now()))
    RETURNING t.turn_id, t.session_id, t.attempt, t.fencing_token, t.lease_expires_at
), attempts AS (
    -- The attempt's row (migration 00320), in the statement that takes its lease: one insert per
    -- claimed turn, its end filled in by the statement that ends the attempt.
    INSERT INTO turn_attempts (turn_id, fencing_token, attempt, worker, lease_expires_at)
    SELECT c.turn_id, c.fencing_token, c.attempt, $10, c.lease_expires_at FROM claimed c
    ON CONFLICT DO NOTHING
)
SELECT c.turn_id, 'ACQUIRED', c.attempt, c.fencing_token, 'running', c.lease_expires_at,
    coalesce((SELECT s.last_seq FROM sessions s WHERE s.session_id = c.session_id), 0), NULL::text
FROM claimed c
UNION ALL
SELECT b.turn_id, 'BLOCKED', 0, 0, 'queued', now(), 0, NULL FROM blocked b
UNION ALL
SELECT p.turn_id, 'PAUSED', 0, 0, 'queued', now(), 0, NULL FROM paused p
UNION ALL
SELECT p.turn_id,
    CASE
        WHEN p.status NOT IN ('queued', 'running') THEN 'DONE'
        WHEN p.status = 'running' AND p.lease_expires_at >= now() THEN 'LEASED'
        WHEN p.cancel_requested THEN 'CANCELLED'
        WHEN p.attempt - p.handoffs >= $12 THEN 'EXHAUSTED'
        ELSE NULL -- claimable by the snapshot, yet not taken: the row changed under the statement
    END,
    p.attempt, p.fencing_token, p.status, coalesce(p.lease_expires_at, now()), 0,
    -- Who held the lease (NULL once released): a claim that took the row over took over their lease.
    CASE WHEN p.status = 'running' THEN p.lease_owner END
FROM req r CROSS JOIN LATERAL (
    SELECT t.turn_id, t.status, t.attempt, t.handoffs, t.fencing_token, t.lease_expires_at, t.cancel_requested,
        t.lease_owner
    FROM turns t WHERE t.turn_id = r.turn_id OFFSET 0
) p
