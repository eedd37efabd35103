SELECT count(*) FROM turns t
WHERE EXISTS (SELECT 1 FROM queue_pauses)
  AND t.status = 'queued' AND NOT t.cancel_requested
  AND ($1::text IS NULL OR t.agent = $1 OR ($2 AND t.agent IS NULL))
  AND EXISTS (SELECT 1 FROM queue_pauses q WHERE (q.tenant = '' OR q.tenant = t.tenant)
              AND (q.agent = '' OR q.agent = coalesce(t.agent, $1)))
