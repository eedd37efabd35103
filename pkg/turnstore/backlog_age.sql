WITH running AS MATERIALIZED (
    -- The turns running under a live lease by tenant and agent: one read of the partial index of
    -- running turns, and none when no quota caps concurrency (a CTE is read only when needed).
    SELECT r.tenant, r.agent, count(*) AS n FROM turns r
    WHERE r.status = 'running' AND r.lease_expires_at >= now()
    GROUP BY r.tenant, r.agent
), capped AS MATERIALIZED (
    -- Tenants (and tenant x agent pairs) that run as many turns as their concurrency quota allows
    -- (/v1/admin/quotas): their queued turns are held, not backlog, since more workers cannot start
    -- them. Each quota row adds up the counts of its tenant's (and agent's) running turns.
    SELECT q.tenant, q.agent FROM tenant_quotas q
    WHERE q.max_running IS NOT NULL AND q.max_running <= (
        SELECT coalesce(sum(g.n), 0) FROM running g
        WHERE g.tenant = q.tenant
          AND (q.agent = '' OR g.agent = q.agent OR (g.agent IS NULL AND $2 AND q.agent = $1)))
)
SELECT extract(epoch FROM now() - min(a)) FROM (
    (SELECT t.accepted_at AS a FROM turns t
     WHERE t.status = 'queued' AND NOT t.cancel_requested
       AND ($1::text IS NULL OR t.agent = $1 OR ($2 AND t.agent IS NULL)) AND (t.deadline IS NULL OR t.deadline > now())
       AND NOT EXISTS (SELECT 1 FROM turns r WHERE r.session_id = t.session_id
                       AND r.status = 'running' AND r.lease_expires_at >= now())
       AND NOT EXISTS (SELECT 1 FROM queue_pauses q WHERE (q.tenant = '' OR q.tenant = t.tenant)
                       AND (q.agent = '' OR q.agent = coalesce(t.agent, $1)))
       AND NOT EXISTS (SELECT 1 FROM capped c WHERE c.tenant = t.tenant
                       AND (c.agent = '' OR c.agent = t.agent OR (t.agent IS NULL AND $2 AND c.agent = $1)))
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
