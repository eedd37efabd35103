// Package stack starts a whole turnstile stack inside the load generator's process: the embedded
// Kafka broker on a free loopback port, then intake, worker and gateway through pkg/app, in a fresh
// Postgres schema and Redis key prefix that Stop removes again. Each process is a Process, with the
// lifecycle of pkg/lifecycle; the broker and the main process are one lifecycle.Group, so a main
// process that fails to start takes the broker down with it, and Stop stops the worker processes,
// then the group, within one deadline.
//
// Decision: the worker can be started separately (StartWorker), as a second app stack over the same
// broker, schema and prefix — the split-process layout of production — so the peer comparison can
// queue work first and then time the workers draining it. Its registry holds the worker role's
// metrics only (WorkerMetrics), so the comparison can read its counters every few milliseconds.
package stack
