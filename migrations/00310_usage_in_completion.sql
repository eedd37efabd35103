-- +goose Up
-- The completion statement (pkg/turnstore/complete.sql) adds a succeeded turn's usage to
-- token_usage itself. The statement trigger of 00261 did it for every UPDATE of turns: its
-- transition table captured every updated row, a lease renewal's too, and cost a renewal of 100
-- held turns 1.18x (median of 5 runs, 0.95-2.77 on a busy machine) and a one-row status change
-- 1.23x (1.20-1.31) (BenchmarkUsageTrigger in pkg/quota, docs/BENCHMARKS.md).
-- A WHEN clause cannot narrow it: a statement trigger's WHEN sees no rows, and a transition table
-- cannot be asked for with a column list (UPDATE OF status). Roll the workers with this migration:
-- a worker built before it completes turns without counting their usage.
DROP TRIGGER turns_count_usage ON turns;
DROP FUNCTION turnstile_count_usage();

-- +goose Down
-- +goose StatementBegin
CREATE FUNCTION turnstile_count_usage() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO token_usage AS u (tenant, agent, day, model, turns, input_tokens, output_tokens, total_tokens)
    SELECT n.tenant, coalesce(n.agent, ''), (now() AT TIME ZONE 'UTC')::date,
        coalesce(n.output->'usage'->>'model', ''), count(*),
        sum(coalesce((n.output->'usage'->>'input_tokens')::bigint, 0)),
        sum(coalesce((n.output->'usage'->>'output_tokens')::bigint, 0)),
        sum(coalesce((n.output->'usage'->>'total_tokens')::bigint, 0))
    FROM new_rows n
    WHERE n.status = 'succeeded' AND n.finished_at = now() AND n.output ? 'usage'
    GROUP BY 1, 2, 3, 4
    ORDER BY 1, 3, 2, 4
    ON CONFLICT (tenant, day, agent, model) DO UPDATE SET
        turns = u.turns + EXCLUDED.turns,
        input_tokens = u.input_tokens + EXCLUDED.input_tokens,
        output_tokens = u.output_tokens + EXCLUDED.output_tokens,
        total_tokens = u.total_tokens + EXCLUDED.total_tokens;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER turns_count_usage AFTER UPDATE ON turns
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION turnstile_count_usage();
