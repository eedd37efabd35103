// Package registry is the agent registry's write path on intake (docs/REGISTRY.md; DESIGN,
// invariant 17): replicas of a catalog agent register under its name with a lease and an epoch
// (POST /v1/agents/{name}/instances), renew with that epoch (a stale one is 412), deregister, and
// workers read the registrations and the changes since a revision. The rows live in Postgres
// (Store, store.sql): every write that changes what a snapshot shows increments one revision
// counter in its own transaction, so revisions commit in order.
//
// Under a herd, Handler admits renewals of known registrations before new registrations and
// reads, and sheds the rest at once with 503 and Retry-After. The Sweeper removes expired
// registrations behind the mass-expiry guard: a sweep that would expire more than the configured
// share of an agent's registrations removes none, freezes them, logs and raises a metric.
package registry
