-- +goose Up
-- API keys: only a SHA-256 of the key is stored, so a database dump does not leak usable keys.
-- A key belongs to one tenant; revoking sets revoked_at (the row stays for audit).
CREATE TABLE api_keys (
    key_id      text PRIMARY KEY,
    tenant      text NOT NULL,
    key_hash    bytea NOT NULL UNIQUE,
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);
CREATE INDEX api_keys_tenant_idx ON api_keys (tenant);

-- Intake counts a tenant's queued turns for its quota. (Double-texting looks up a session's live
-- turns through turns_session_idx; one more index on every queued row was not worth it.)
CREATE INDEX turns_tenant_queued_idx ON turns (tenant) WHERE status = 'queued';

-- +goose Down
DROP INDEX turns_tenant_queued_idx;
DROP TABLE api_keys;
