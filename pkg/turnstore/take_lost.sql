WITH lost AS (
    SELECT t.turn_id FROM turns t
    WHERE (t.status = 'queued' OR (t.status = 'running' AND t.lease_expires_at < now()))
      AND NOT t.cancel_requested
      AND (t.agent = $8 OR ($9 AND t.agent IS NULL))
      AND (t.deadline IS NULL OR t.deadline > now())
      AND (t.redriven_at IS NULL OR t.redriven_at < now() - $7 * interval '1 millisecond')
      AND (
        -- Its record went to an older incarnation of the topic.
        ($2::uuid IS NOT NULL AND t.kafka_topic_id IS NOT NULL AND t.kafka_topic_id <> $2)
        -- Where its record went is not known: judged by age.
        OR ((t.kafka_topic_id IS NULL OR t.kafka_offset IS NULL) AND t.accepted_at < $5)
        -- Its partition is gone, retention deleted its record, or the log was truncated below it.
        OR (t.kafka_offset IS NOT NULL AND ($2::uuid IS NULL OR t.kafka_topic_id IS NULL OR t.kafka_topic_id = $2)
            AND (t.kafka_partition >= cardinality($3::bigint[])
                 OR t.kafka_offset < ($3::bigint[])[t.kafka_partition + 1]
                 OR (t.accepted_at < $1 AND t.kafka_offset >= ($4::bigint[])[t.kafka_partition + 1])))
      )
    ORDER BY t.accepted_at, t.turn_id
    LIMIT $6
    FOR UPDATE SKIP LOCKED
)
UPDATE turns t SET redriven_at = now(), redrives = t.redrives + 1
FROM lost l WHERE t.turn_id = l.turn_id
RETURNING t.turn_id, t.session_id, t.tenant, t.client_turn_id, t.status, t.input, t.metadata,
    coalesce(t.multitask, ''), coalesce(t.traceparent, ''), t.deadline, t.accepted_at, t.redrives, t.agent
