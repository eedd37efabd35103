-- +goose Up
-- LangGraph threads idle past TURNSTILE_LANGGRAPH_THREAD_TTL are deleted by the workers'
-- retention cleaner, least recently used first (pkg/turnstore, delete_idle_threads.sql).
CREATE INDEX langgraph_threads_updated_idx ON langgraph_threads (updated_at);

-- +goose Down
DROP INDEX langgraph_threads_updated_idx;
