-- +goose Up
-- The admin surface (services/intake/internal/admin).
--
-- An API key is a tenant's (it sees only its tenant) or an admin's (it sees every tenant).
ALTER TABLE api_keys ADD COLUMN role text NOT NULL DEFAULT 'tenant' CHECK (role IN ('tenant', 'admin'));

-- dead_lettered keeps the reason a turn was dead-lettered for good: dead_letter_reason is cleared
-- once the dead-letter topic acknowledged the copy, and the admin API lists dead letters after.
ALTER TABLE turns ADD COLUMN dead_lettered text;

-- A replay is a new turn of the original's session and input, linked to the original here; the
-- original's row is never rewritten. A bulk replay names its job, and its new turn's ID is derived
-- from the job and the original, so a resumed job produces the same turn again, never a second one.
CREATE TABLE turn_replays (
    turn_id          uuid PRIMARY KEY,
    original_turn_id uuid NOT NULL,
    tenant           text NOT NULL,
    job_id           uuid,
    created_by       text NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX turn_replays_original_idx ON turn_replays (original_turn_id);

-- A bulk action: the turns its filter matched when it was created are its items, one row each,
-- acted on by whichever intake holds the job's lease; an item leaves 'pending' in the statement
-- that records its outcome, so a job resumed after its runner died acts on each item once.
CREATE TABLE admin_jobs (
    job_id           uuid PRIMARY KEY,
    name             text NOT NULL,
    action           text NOT NULL CHECK (action IN ('cancel', 'replay')),
    -- scope is the tenant whose turns the job may touch, NULL for an admin's job over every tenant.
    scope            text,
    filter           jsonb NOT NULL,
    options          jsonb NOT NULL DEFAULT '{}'::jsonb,
    state            text NOT NULL CHECK (state IN ('running', 'cancelling', 'cancelled', 'succeeded', 'failed')),
    total            integer NOT NULL DEFAULT 0,
    done             integer NOT NULL DEFAULT 0,
    failed           integer NOT NULL DEFAULT 0,
    created_by       text NOT NULL,
    creator_tenant   text NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    finished_at      timestamptz,
    lease_owner      text,
    lease_expires_at timestamptz,
    runs             integer NOT NULL DEFAULT 0,
    error            text
);
CREATE UNIQUE INDEX admin_jobs_name_idx ON admin_jobs (coalesce(scope, ''), name);
CREATE INDEX admin_jobs_live_idx ON admin_jobs (lease_expires_at) WHERE state IN ('running', 'cancelling');

CREATE TABLE admin_job_items (
    job_id         uuid NOT NULL REFERENCES admin_jobs ON DELETE CASCADE,
    turn_id        uuid NOT NULL,
    state          text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'done', 'skipped', 'failed')),
    result_turn_id uuid,
    detail         text,
    done_at        timestamptz,
    PRIMARY KEY (job_id, turn_id)
);
CREATE INDEX admin_job_items_pending_idx ON admin_job_items (job_id, turn_id) WHERE state = 'pending';

-- Every admin action: who (the key and its tenant), what, when, on what (a turn, a job, a filter),
-- and how it ended.
CREATE TABLE admin_audit (
    audit_id   bigserial PRIMARY KEY,
    at         timestamptz NOT NULL DEFAULT now(),
    key_id     text NOT NULL,
    tenant     text NOT NULL,
    action     text NOT NULL,
    target     text,
    filter     jsonb,
    outcome    text NOT NULL,
    detail     text
);
CREATE INDEX admin_audit_tenant_idx ON admin_audit (tenant, audit_id DESC);

-- Searching turns (admin API), newest first, keyset-paginated on (accepted_at, turn_id): within a
-- tenant, across tenants, among failed turns and among dead letters (the last two are partial, so
-- a status change to anything else writes no entry); a session filter uses turns_session_idx, a
-- queued or running one the partial indexes of 00050 and 00100.
CREATE INDEX turns_tenant_accepted_idx ON turns (tenant, accepted_at DESC, turn_id DESC);
CREATE INDEX turns_accepted_idx ON turns (accepted_at DESC, turn_id DESC);
CREATE INDEX turns_failed_accepted_idx ON turns (accepted_at DESC, turn_id DESC) WHERE status = 'failed';
CREATE INDEX turns_dead_lettered_idx ON turns (accepted_at DESC, turn_id DESC) WHERE dead_lettered IS NOT NULL;

-- +goose Down
DROP INDEX turns_dead_lettered_idx;
DROP INDEX turns_failed_accepted_idx;
DROP INDEX turns_accepted_idx;
DROP INDEX turns_tenant_accepted_idx;
DROP TABLE admin_audit;
DROP TABLE admin_job_items;
DROP TABLE admin_jobs;
DROP TABLE turn_replays;
ALTER TABLE turns DROP COLUMN dead_lettered;
ALTER TABLE api_keys DROP COLUMN role;
