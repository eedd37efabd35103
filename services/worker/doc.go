// Package worker is turnstile's worker role: it consumes turns from Kafka, claims each in Postgres
// under a renewable, fenced lease, runs the configured agent, publishes the turn's events to the
// session's Redis Stream and records the outcome exactly once.
//
// The role is a Component (see pkg/app) so that the single-role binary (cmd/turnstile-worker) and
// the all-in-one `turnstile` binary compose it alike. Its parts live in internal/: consume (the
// key-ordered consumer), execute (one turn's attempts), lease (the Postgres statements), offsets
// (per-partition commit points) and agent (what it runs).
package worker
