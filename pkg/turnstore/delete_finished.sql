DELETE FROM turns WHERE turn_id IN (
    SELECT turn_id FROM turns
    WHERE finished_at < now() - $1 * interval '1 millisecond' AND dead_letter_reason IS NULL
    ORDER BY finished_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
)
