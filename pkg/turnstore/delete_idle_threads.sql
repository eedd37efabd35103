DELETE FROM langgraph_threads WHERE (tenant, thread_id) IN (
    SELECT th.tenant, th.thread_id FROM langgraph_threads th
    WHERE th.updated_at < now() - $1 * interval '1 millisecond'
      -- A thread with a run in flight is not idle (turns_live_session_idx answers this).
      AND NOT EXISTS (SELECT 1 FROM turns t
          WHERE t.session_id = th.tenant || '/' || th.thread_id AND t.status IN ('queued', 'running'))
    ORDER BY th.updated_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
)
