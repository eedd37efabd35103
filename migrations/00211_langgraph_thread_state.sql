-- +goose Up
-- A LangGraph thread's state set through the API rather than by its runs: a state edit
-- (POST /threads/{id}/state, human in the loop) or a copy (POST /threads/{id}/copy). The thread's
-- messages are then these, followed by those of its runs after state_after_run (the session's
-- newest turn when it was set; none: every run). The session history the agent reads is rewritten
-- to match in the same request (pkg/turnstore RewriteHistory).
ALTER TABLE langgraph_threads
    ADD COLUMN state            jsonb,
    ADD COLUMN state_checkpoint text,
    ADD COLUMN state_after_run  text,
    ADD COLUMN state_at         timestamptz;

-- +goose Down
ALTER TABLE langgraph_threads
    DROP COLUMN state, DROP COLUMN state_checkpoint, DROP COLUMN state_after_run, DROP COLUMN state_at;
