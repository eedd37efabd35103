SELECT extract(epoch FROM now() - min(a)) FROM (
    (SELECT t.accepted_at AS a FROM turns t
     WHERE t.status = 'queued' AND NOT t.cancel_requested
       AND ($1::text IS NULL OR t.agent = $1 OR ($2 AND t.agent IS NULL)) AND (t.deadline IS NULL OR t.deadline > now())
       AND NOT EXISTS (SELECT 1 FROM turns r WHERE r.session_id = t.session_id
                       AND r.status = 'running' AND r.lease_expires_at >= now())
       AND NOT EXISTS (SELECT 1 FROM queue_pauses q WHERE (q.tenant = '' OR q.tenant = t.tenant)
                       AND (q.agent = '' OR q.agent = coalesce(t.agent, $1)))
     ORDER BY t.accepted_at LIMIT 1)
    UNION ALL
    (SELECT t.accepted_at FROM turns t
     WHERE t.status = 'running' AND t.lease_expires_at < now()
       AND ($1::text IS NULL OR t.agent = $1 OR ($2 AND t.agent IS NULL))
       AND NOT t.cancel_requested AND (t.deadline IS NULL OR t.deadline > now())
       AND NOT EXISTS (SELECT 1 FROM turns r WHERE r.session_id = t.session_id
                       AND r.status = 'running' AND r.lease_expires_at >= now())
       AND NOT EXISTS (SELECT 1 FROM queue_pauses q WHERE (q.tenant = '' OR q.tenant = t.tenant)
                       AND (q.agent = '' OR q.agent = coalesce(t.agent, $1)))
     ORDER BY t.accepted_at LIMIT 1)
) oldest
