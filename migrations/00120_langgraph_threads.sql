-- +goose Up
-- LangGraph threads (services/langgraph): a thread exists from POST /threads on, before any run,
-- with its metadata. The thread is the session of the same ID in the tenant's namespace; its runs
-- are that session's turns, so nothing else of a thread is stored here.
CREATE TABLE langgraph_threads (
    tenant     text        NOT NULL,
    thread_id  text        NOT NULL,
    metadata   jsonb       NOT NULL DEFAULT '{}'::jsonb,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, thread_id)
);

-- +goose Down
DROP TABLE langgraph_threads;
