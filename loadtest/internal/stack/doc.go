// Package stack starts a whole turnstile stack inside the load generator's process: the embedded
// Kafka broker on a free loopback port, then intake, worker and gateway through pkg/app, in a fresh
// Postgres schema and Redis key prefix that Stop removes again.
//
// Decision: the worker can be started separately (StartWorker), as a second app stack over the same
// broker, schema and prefix — the split-process layout of production — so the peer comparison can
// queue work first and then time the workers draining it. Its registry holds the worker role's
// metrics only (WorkerMetrics), so the comparison can read its counters every few milliseconds.
package stack
