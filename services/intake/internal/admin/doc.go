// Package admin is the operator's API, /v1/admin/…: search turns by filter, read a turn's
// timeline and what blocks its session, list dead letters, cancel and replay one turn, run bulk
// cancels and replays by filter as jobs, pause and resume a tenant's or an agent's queue, list and
// drain the workers, read the configuration, read the audit log of every admin action and the live
// turns by agent and tenant (backlog), and mint a stream token for a turn's session so an operator
// can follow it live on the gateway. The CLI (`turnstile turns|jobs|workers|queue|dlq|audit|
// admin-config`) and the console (package console, /console/) speak it.
//
// Who sees what. Every route runs behind intake's authentication: an admin key (pkg/apikey,
// `apikey create --admin`) sees every tenant; a tenant's key sees only its tenant, whatever its
// filter says, and another tenant's turn or job is a 404, as an unknown one is. With
// TURNSTILE_AUTH=off every request is the default tenant's admin.
//
// Decisions:
//   - A replay is a new turn (same session, same input, the metadata optionally changed), produced
//     through intake's path (api.Handler.Submit) and linked to the original in turn_replays; the
//     original's row is never written. Replays skip the tenant's admission quotas: an operator's
//     replay is not the tenant's load.
//   - A bulk job snapshots the turns its filter matches into admin_job_items when it is created,
//     so its total is known and a turn accepted later is not swept up. Jobs run in whichever intake
//     holds their lease (Runner); an item leaves 'pending' in the statement that records its
//     outcome, fenced by the lease, and a replay's new turn ID is derived from the job and the
//     original (uuid v5), so a job resumed after its intake was killed produces at most the same
//     turn again — which the worker's claim runs once — and never a second one.
//   - A queue pause is a queue_pauses row that the worker's claim statement reads (outcome
//     PAUSED, the record deferred and claimed again within seconds) and the backlog age skips;
//     no message has to reach every worker, and a worker that starts later honours it too.
//   - Workers are listed from the rows they write themselves (worker_heartbeats, package presence
//     of the worker), joined with the leases they hold; a drain is a flag on that row which the
//     worker reads back. Draining a worker and the configuration view are for admin keys (403
//     admin-required for a tenant's key): both concern the installation, not a tenant.
//   - Every action writes an admin_audit row (who: key and tenant; what; the target or filter;
//     the outcome), refusals of an action included; reads are not audited.
package admin
