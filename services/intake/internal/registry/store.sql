-- Statements of the agent registry's store (store.go). Each is a section named by its first line;
-- every statement that changes what a snapshot shows increments registry_head in its own
-- transaction, which orders those writes (see migrations/00250_agent_registry.sql). A renewal
-- of a live registration changes only its lease and takes no lock but its row's.

-- name: register
-- A new instance ID inserts; an existing one is taken over only when its registration is removed,
-- expired, or at the same endpoint (the same replica registering again): a live registration of
-- another endpoint keeps the ID and nothing is returned (409). The epoch is the new revision, so
-- it grows with every registration of the ID, even one made after the ID's tombstone was purged.
WITH head AS (
    UPDATE registry_head SET revision = revision + 1 RETURNING revision
)
INSERT INTO agent_instances AS a (agent, instance_id, endpoint, zone, card_digest, epoch, state,
    lease_expires_at, renewed_at, registered_at, revision)
SELECT $1, $2, $3, $4, $5, head.revision, 'live', now() + $6 * interval '1 millisecond', now(), now(), head.revision
FROM head
ON CONFLICT (agent, instance_id) DO UPDATE SET
    endpoint = excluded.endpoint, zone = excluded.zone, card_digest = excluded.card_digest,
    epoch = excluded.epoch, state = 'live', lease_expires_at = excluded.lease_expires_at,
    renewed_at = excluded.renewed_at, registered_at = excluded.registered_at, revision = excluded.revision
WHERE a.state = 'deleted' OR a.lease_expires_at < now() OR a.endpoint = excluded.endpoint
RETURNING epoch, lease_expires_at;

-- name: renew
-- The common case: a live registration's holder renews with its epoch.
UPDATE agent_instances SET lease_expires_at = now() + $4 * interval '1 millisecond', renewed_at = now()
WHERE agent = $1 AND instance_id = $2 AND epoch = $3 AND state = 'live'
RETURNING lease_expires_at;

-- name: renew_frozen
-- A frozen registration's holder renews with its epoch after a partition healed: it is live
-- again, a change readers learn of.
WITH head AS (
    UPDATE registry_head SET revision = revision + 1 RETURNING revision
)
UPDATE agent_instances a SET lease_expires_at = now() + $4 * interval '1 millisecond', renewed_at = now(),
    state = 'live', revision = head.revision
FROM head
WHERE a.agent = $1 AND a.instance_id = $2 AND a.epoch = $3 AND a.state = 'frozen'
RETURNING a.lease_expires_at;

-- name: deregister
WITH head AS (
    UPDATE registry_head SET revision = revision + 1 RETURNING revision
)
UPDATE agent_instances a SET state = 'deleted', lease_expires_at = now(), revision = head.revision
FROM head
WHERE a.agent = $1 AND a.instance_id = $2 AND a.epoch = $3 AND a.state <> 'deleted'
RETURNING a.instance_id;

-- name: list
SELECT instance_id, endpoint, zone, card_digest, epoch, state, lease_expires_at, renewed_at, registered_at,
    revision, lease_expires_at < now() AS expired
FROM agent_instances
WHERE agent = $1 AND state <> 'deleted'
ORDER BY instance_id;

-- name: head
SELECT revision, compacted FROM registry_head;

-- name: changes
-- The agent's registrations changed after $2, tombstones included (agent_instances_revision_idx).
SELECT instance_id, endpoint, zone, card_digest, epoch, state, lease_expires_at, renewed_at, registered_at,
    revision, lease_expires_at < now() AS expired
FROM agent_instances
WHERE agent = $1 AND revision > $2
ORDER BY instance_id;

-- name: sweep_lock
-- One sweep at a time across the intake replicas: a transaction-scoped advisory lock, keyed by the
-- schema so installations sharing a database do not exclude each other. A replica that does not
-- get it skips its sweep.
SELECT pg_try_advisory_xact_lock(hashtext('turnstile.registry.sweep:' || current_schema()));

-- name: sweep_counts
-- Every agent's registrations and how many of them expired, as of the sweep's transaction start.
SELECT agent, count(*) AS total,
    count(*) FILTER (WHERE lease_expires_at < now()) AS expired,
    count(*) FILTER (WHERE state = 'frozen') AS frozen
FROM agent_instances
WHERE state <> 'deleted'
GROUP BY agent;

-- name: sweep_delete
-- Remove the registrations of agents whose expiries the guard allows that have been expired for
-- the grace $2 ms: the leases of a partitioned zone run out over a heartbeat's jitter, and the
-- grace lets the guard see them all as one storm before any is removed.
WITH head AS (
    UPDATE registry_head SET revision = revision + 1 RETURNING revision
)
UPDATE agent_instances a SET state = 'deleted', revision = head.revision
FROM head
WHERE a.agent = ANY($1::text[]) AND a.state <> 'deleted'
    AND a.lease_expires_at < now() - $2 * interval '1 millisecond'
RETURNING a.agent, a.instance_id;

-- name: sweep_freeze
-- Keep the expired registrations of agents where the guard tripped, marked frozen.
WITH head AS (
    UPDATE registry_head SET revision = revision + 1 RETURNING revision
)
UPDATE agent_instances a SET state = 'frozen', revision = head.revision
FROM head
WHERE a.agent = ANY($1::text[]) AND a.state = 'live' AND a.lease_expires_at < now()
RETURNING a.agent;

-- name: sweep_thaw
-- The guard released agents $1 (the expired share fell back within it, as renewals return after a
-- partition heals): the registrations still frozen get one more lease of $2 ms, live again. Without
-- it the tail of a healing zone, whose renewals come over a heartbeat after the first ones, would be
-- removed as soon as the first ones had brought the share down, and would have to register again. A
-- replica that did die is removed once that lease has run out.
WITH head AS (
    UPDATE registry_head SET revision = revision + 1 RETURNING revision
)
UPDATE agent_instances a SET state = 'live', lease_expires_at = now() + $2 * interval '1 millisecond',
    revision = head.revision
FROM head
WHERE a.agent = ANY($1::text[]) AND a.state = 'frozen'
RETURNING a.agent, a.instance_id;

-- name: purge
-- Forget tombstones older than $1 ms; a reader behind the highest purged revision reloads.
WITH gone AS (
    DELETE FROM agent_instances
    WHERE state = 'deleted' AND lease_expires_at < now() - $1 * interval '1 millisecond'
    RETURNING revision
)
UPDATE registry_head SET compacted = greatest(compacted, (SELECT max(revision) FROM gone))
WHERE EXISTS (SELECT 1 FROM gone)
RETURNING compacted;
