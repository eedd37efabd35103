UPDATE turns SET cancel_requested = true, updated_at = now()
WHERE session_id = $1 AND status IN ('queued', 'running') AND turn_id <> $2 AND accepted_at <= $3
  AND NOT cancel_requested
