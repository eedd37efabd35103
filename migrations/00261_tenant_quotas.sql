-- +goose Up
-- Runtime quotas set through /v1/admin/quotas (pkg/quota). agent '' is the tenant's quota over
-- every agent; a named agent's row is the tenant x agent quota. A NULL limit is no limit. Every
-- worker and intake replica re-reads the table each TURNSTILE_QUOTA_REFRESH.
CREATE TABLE tenant_quotas (
    tenant          text NOT NULL,
    agent           text NOT NULL DEFAULT '',
    max_running     integer CHECK (max_running >= 0),
    rate_per_second integer CHECK (rate_per_second >= 1),
    budget_tokens   bigint CHECK (budget_tokens >= 0),
    budget_period   text CHECK (budget_period IN ('day', 'month')),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, agent)
);

-- Token usage per tenant, agent, UTC day and model, added up from the usage a succeeded turn's
-- output records, in the transaction that marks it succeeded (so counted exactly once). The
-- trigger is per statement: it adds a whole completion batch up and takes the usage rows' locks in
-- key order, so two batches cannot deadlock on them.
CREATE TABLE token_usage (
    tenant        text NOT NULL,
    agent         text NOT NULL,
    day           date NOT NULL,
    model         text NOT NULL,
    turns         bigint NOT NULL DEFAULT 0,
    input_tokens  bigint NOT NULL DEFAULT 0,
    output_tokens bigint NOT NULL DEFAULT 0,
    total_tokens  bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, day, agent, model)
);

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
    -- finished in this transaction: the completion sets finished_at = now(); a later update of a
    -- finished row runs in a later transaction, whose now() is later.
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

-- +goose Down
DROP TRIGGER turns_count_usage ON turns;
DROP FUNCTION turnstile_count_usage();
DROP TABLE token_usage;
DROP TABLE tenant_quotas;
