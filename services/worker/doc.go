// Package worker is turnstile's worker role: it consumes turns from Kafka, claims each in Postgres
// under a renewable, fenced lease, runs the configured agent, publishes the turn's events to the
// session's Redis Stream and records the outcome exactly once.
//
// The role is a Component (see pkg/app) so that the single-role binary (cmd/turnstile-worker) and
// the all-in-one `turnstile` binary compose it alike. Its parts live in internal/: consume (the
// key-ordered consumer), execute (one turn's attempts), lease (the Postgres statements), offsets
// (per-partition commit points), agent (what it runs), cancelwatch (LISTEN/NOTIFY delivery of
// cancel requests to running turns, with lease renewal as the fallback) and retention (batched
// deletion of finished turn rows older than TURNSTILE_RETENTION).
//
// Failover speed is set by three settings: TURNSTILE_LEASE_TTL (how soon a dead worker's turns can
// be taken over), TURNSTILE_WORKER_SESSION_TIMEOUT (how soon its partitions move to another
// worker) and TURNSTILE_HEARTBEAT_INTERVAL (how often leases are renewed: one statement per worker
// per interval, whatever its number of turns). The end-to-end worker tests in
// cmd/turnstile/integration (worker_*_test.go) prove the invariants with real processes: SIGKILL
// every two seconds, SIGSTOP past the lease, SIGTERM with turns in flight.
package worker
