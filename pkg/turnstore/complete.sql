WITH req AS MATERIALIZED (
    SELECT * FROM unnest($1::uuid[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::integer[],
        $8::integer[]) WITH ORDINALITY AS r(turn_id, token, answer, state, usage, upstream, events, waits, ord)
), done AS MATERIALIZED (
-- include: locked_turns.sql
), updated AS (
    UPDATE turns t SET status = 'succeeded', output = CASE
            WHEN coalesce(d.state, '') = '' AND coalesce(d.usage, '') = '' THEN jsonb_build_object('text', d.answer)
            WHEN coalesce(d.usage, '') = '' THEN jsonb_build_object('text', d.answer, 'state', d.state)
            WHEN coalesce(d.state, '') = '' THEN jsonb_build_object('text', d.answer, 'usage', d.usage::jsonb)
            ELSE jsonb_build_object('text', d.answer, 'state', d.state, 'usage', d.usage::jsonb) END,
        error = NULL, finished_at = now(),
        lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
    FROM done d WHERE t.turn_id = d.turn_id
), usage AS (
    -- The reported usage, added to token_usage per tenant, agent, UTC day and model in the
    -- statement that marks the turns succeeded (so counted exactly once), its rows locked in key
    -- order so two batches cannot deadlock on them. (A trigger on turns did this until migration
    -- 00310: it captured every UPDATE's rows, lease renewals too, for this one statement's sake.)
    INSERT INTO token_usage AS u (tenant, agent, day, model, turns, input_tokens, output_tokens, total_tokens)
    SELECT d.tenant, coalesce(t.agent, ''), (now() AT TIME ZONE 'UTC')::date, coalesce(d.u->>'model', ''), count(*),
        sum(coalesce((d.u->>'input_tokens')::bigint, 0)),
        sum(coalesce((d.u->>'output_tokens')::bigint, 0)),
        sum(coalesce((d.u->>'total_tokens')::bigint, 0))
    FROM (SELECT turn_id, tenant, usage::jsonb AS u FROM done WHERE coalesce(usage, '') <> '') d
    JOIN turns t ON t.turn_id = d.turn_id
    GROUP BY 1, 2, 3, 4
    ORDER BY 1, 3, 2, 4
    ON CONFLICT (tenant, day, agent, model) DO UPDATE SET
        turns = u.turns + EXCLUDED.turns,
        input_tokens = u.input_tokens + EXCLUDED.input_tokens,
        output_tokens = u.output_tokens + EXCLUDED.output_tokens,
        total_tokens = u.total_tokens + EXCLUDED.total_tokens
), attempt AS (
    -- The attempt's end (migration 00320): a probe of its row by primary key.
    UPDATE turn_attempts a SET ended_at = now(), outcome = 'succeeded', upstream = nullif(d.upstream, ''),
        events = d.events, waits = d.waits
    FROM done d WHERE a.turn_id = d.turn_id AND a.fencing_token = d.token
), seq AS (
    INSERT INTO sessions AS s (session_id, tenant, last_seq)
    SELECT session_id, min(tenant), 2 * count(*) FROM done GROUP BY session_id ORDER BY session_id
    ON CONFLICT (session_id) DO UPDATE SET last_seq = s.last_seq + EXCLUDED.last_seq, updated_at = now()
    RETURNING s.session_id, s.last_seq
), last AS MATERIALIZED (
    SELECT jsonb_object_agg(session_id, last_seq) AS by_session FROM seq
), ranked AS (
    -- later: how many of the session's turns in this batch come after this one.
    SELECT session_id, turn_id, ord, question, answer, count(*) OVER w - row_number() OVER w AS later
    FROM done
    WINDOW w AS (PARTITION BY session_id ORDER BY ord ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
), numbered AS (
    SELECT r.*, ((SELECT by_session FROM last)->>r.session_id)::bigint - 2 * r.later AS top FROM ranked r
), msgs AS (
    INSERT INTO session_history (session_id, seq, turn_id, question, answer)
    SELECT session_id, top, turn_id, coalesce(question, ''), answer FROM numbered
)
SELECT ord, top FROM numbered
