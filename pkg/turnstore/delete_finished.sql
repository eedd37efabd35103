WITH gone AS (
    DELETE FROM turns WHERE turn_id IN (
        SELECT turn_id FROM turns
        WHERE finished_at < now() - $1 * interval '1 millisecond' AND dead_letter_reason IS NULL
        ORDER BY finished_at
        LIMIT $2
        FOR UPDATE SKIP LOCKED
    )
    RETURNING turn_id, tenant
), notifications AS (
    -- A turn's notifications (an A2A task's are filed under its first turn) go with it.
    DELETE FROM turn_notifications WHERE turn_id IN (SELECT g.turn_id FROM gone g)
), attempts AS (
    -- A turn's attempts (migration 00320) go with it.
    DELETE FROM turn_attempts WHERE turn_id IN (SELECT g.turn_id FROM gone g)
), configs AS (
    -- A task's push configs go with its first turn.
    DELETE FROM task_push_configs c USING gone g WHERE c.task_id = g.turn_id AND c.tenant = g.tenant
)
SELECT count(*) FROM gone
