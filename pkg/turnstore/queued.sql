WITH rows AS (
    SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::timestamptz[], $5::timestamptz[],
        $6::boolean[], $7::uuid[], $8::text[], $9::jsonb[], $10::text[], $11::text[], $12::integer[],
        $13::bigint[], $14::uuid[], $15::text[], $16::text[], $17::jsonb[], $18::uuid[], $19::text[], $20::smallint[])
        AS r(turn_id, session_id, tenant, accepted_at, deadline, need_session, client_turn_id, input_text,
            metadata, multitask, traceparent, kpart, koff, ktopic, webhook_url, webhook_token, push_configs, task_id, agent, priority)
), notify AS (
    -- The push configs of the rows the insert below proposes (one per turn, as DISTINCT ON
    -- picks it), stored before its outbox trigger runs.
    SELECT DISTINCT ON (turn_id) turn_id, tenant, push_configs, task_id FROM rows
    WHERE push_configs IS NOT NULL ORDER BY turn_id, accepted_at
), configs AS (
-- include: push_configs.sql
)
-- include: queued_sessions.sql
INSERT INTO turns AS t (turn_id, session_id, tenant, status, accepted_at, deadline, client_turn_id, input, metadata,
    multitask, traceparent, kafka_partition, kafka_offset, kafka_topic_id, webhook_url, webhook_token, task_id, agent, priority)
SELECT DISTINCT ON (turn_id) turn_id, session_id, tenant, 'queued', accepted_at, deadline, client_turn_id,
    jsonb_build_object('text', input_text), metadata, multitask, traceparent, kpart, koff, ktopic,
    webhook_url, webhook_token, task_id, NULLIF(agent, ''), priority
FROM rows ORDER BY turn_id, accepted_at
ON CONFLICT (turn_id) DO UPDATE SET kafka_topic_id = EXCLUDED.kafka_topic_id,
    multitask = coalesce(t.multitask, EXCLUDED.multitask), traceparent = coalesce(t.traceparent, EXCLUDED.traceparent)
WHERE t.kafka_topic_id IS NULL AND EXCLUDED.kafka_topic_id IS NOT NULL
  AND t.kafka_partition = EXCLUDED.kafka_partition AND t.kafka_offset = EXCLUDED.kafka_offset
