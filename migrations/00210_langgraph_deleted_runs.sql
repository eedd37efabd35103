-- +goose Up
-- LangGraph runs deleted through the API (DELETE /threads/{id}/runs/{run_id}, and a cancel with
-- action=rollback): the run is a turn, whose row stays until retention so a redelivered Kafka
-- record still finds it done and never runs again; the langgraph role hides a run named here from
-- the thread's runs (and a rolled-back one from its state and history too). A row goes with its thread.
CREATE TABLE langgraph_deleted_runs (
    tenant     text        NOT NULL,
    thread_id  text        NOT NULL,
    run_id     text        NOT NULL,
    -- rolled_back: cancelled with action=rollback, so its input is not in the thread's state either.
    rolled_back boolean    NOT NULL DEFAULT false,
    deleted_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, thread_id, run_id),
    FOREIGN KEY (tenant, thread_id) REFERENCES langgraph_threads (tenant, thread_id) ON DELETE CASCADE
);

-- +goose Down
DROP TABLE langgraph_deleted_runs;
