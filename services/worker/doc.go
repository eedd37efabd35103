// Package worker is turnstile's worker role: it consumes turns from Kafka, claims each in Postgres
// under a renewable, fenced lease, runs the configured agent, publishes the turn's events to the
// session's Redis Stream and records the outcome exactly once.
//
// The role is a Component (see pkg/app) so that the single-role binary (cmd/turnstile-worker) and
// the all-in-one `turnstile` binary compose it alike. Its background parts are one lifecycle.Group
// (see Worker): Start returns at once, the consumer joins the group in the background, and the
// worker is not ready (/readyz says why) until Kafka has answered. Its parts live in internal/:
// consume (the key-ordered consumer), execute (one turn's path and attempts), deadletter (the
// producer poison records go to), batch (group commit of the hot-path round trips), lease (the
// batched claim and completion and the lease renewer; single statements are pkg/turnstore's),
// history (the session-history cache), offsets (per-partition commit points), agent (what it
// runs), cancelwatch (LISTEN/NOTIFY delivery of cancel requests to running turns, with lease
// renewal as the fallback) and retention (batched deletion of finished turn rows older than
// TURNSTILE_RETENTION).
//
// A record's way through the worker reads as one chain of stages, assembled in one place
// (execute.Executor.stages): decode → repeat → expire early → claim → attempt. A new step of that
// path — routing a turn to one of several agents, a tenant's share, a budget check — is one stage
// added to that list (see package execute). worker.go builds the executor with every collaborator
// it needs (execute.Config), dead-lettering included, and then the consumer that hands it records.
//
// Throughput comes from batching, not from more round trips in parallel: the turns a worker runs at
// once send their claims, completions (with the history append) and event publishes through
// group-commit batchers (internal/batch), so each step costs one set-based Postgres statement or one
// Redis pipeline per batch instead of one round trip per turn. A batch holds what arrived while the
// previous one was in flight — no timer, so a lone turn waits for nothing and a busy worker sends
// large batches. Each row keeps its own fencing and lease conditions and each turn gets its own
// outcome, so batching changes the cost of a turn, never what it may do. The claim also reads the
// session's history sequence number and the completion returns the new one, so the history cache
// answers without a round trip. A no-op turn costs shares of two Postgres statements (claim,
// completion) and of three Redis pipelines (turn.started, turn.delta, turn.completed). The
// turnstile_worker_batch_size and turnstile_worker_batch_duration_seconds histograms show how
// large the batches grow and how long their round trips take.
//
// Failover speed is set by three settings: TURNSTILE_LEASE_TTL (how soon a dead worker's turns can
// be taken over), TURNSTILE_WORKER_SESSION_TIMEOUT (how soon its partitions move to another
// worker) and TURNSTILE_HEARTBEAT_INTERVAL (how often leases are renewed: one statement per worker
// per interval, whatever its number of turns). The takeover after a crash lasts the later of the
// session timeout and the lease's expiry; with the defaults (10s, 15s) the lease sets it
// (README, "Takeover after a worker dies"). The worker is not ready until the group has assigned
// it, which after a crash is once the dead member's session timed out. The end-to-end worker tests in
// cmd/turnstile/integration (worker_*_test.go) prove the invariants with real processes: SIGKILL
// every two seconds, SIGSTOP past the lease, SIGTERM with turns in flight.
//
// A worker serves the agents of TURNSTILE_WORKER_AGENTS (default: the catalog's default agent;
// pkg/agents), each in a lane of its own: the agent's topic and consumer group (the turns topic
// and TURNSTILE_CONSUMER_GROUP for the default agent, <topic>.<agent> and <group>.<agent> for any
// other), its turns in flight (limits.in_flight), its lease store and attempts, its claim,
// completion and publish batchers and its upstream guard. A saturated agent so fills only its own
// slots and statements and never delays another agent's turns (invariant 16); per-session order
// across agents holds because the claim's order check reads the session's turns whatever their
// agent (README, "Many agents").
package worker
