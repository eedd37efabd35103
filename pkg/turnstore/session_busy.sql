SELECT EXISTS (
    SELECT 1 FROM turns
    WHERE session_id = $1 AND status IN ('queued', 'running') AND turn_id <> $2
)
