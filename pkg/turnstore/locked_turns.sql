    SELECT r.*, l.* FROM (SELECT * FROM req ORDER BY turn_id) r
    CROSS JOIN LATERAL (
        SELECT t.fencing_token AS held_token, t.status AS held_status, t.session_id, t.tenant,
            t.input->>'text' AS question
        FROM turns t WHERE t.turn_id = r.turn_id OFFSET 0 FOR UPDATE
    ) l
    WHERE l.held_token = r.token AND l.held_status = 'running'
