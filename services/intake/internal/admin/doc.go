// Package admin is the operator's API, /v1/admin/…: search turns by filter, read a turn's
// timeline and what blocks its session, list dead letters, cancel and replay one turn, run bulk
// cancels and replays by filter as jobs, list the workers holding turns, and read the audit log of
// every admin action, the live turns by agent and tenant (backlog), and mint a stream token for a
// turn's session so an operator can follow it live on the gateway. The CLI (`turnstile
// turns|jobs|workers|dlq|audit`) and the console (package console, /console/) speak it.
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
//   - Every action writes an admin_audit row (who: key and tenant; what; the target or filter;
//     the outcome), refusals of an action included; reads are not audited.
package admin
