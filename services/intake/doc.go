// Package intake is turnstile's front door: it validates a posted turn, writes it to Kafka keyed by
// session (acknowledged by every in-sync replica before it answers) and answers 202 at once with the
// turn ID and where to stream its events. It also serves a turn's status from Postgres.
//
// Only Kafka is on the accept path, so intake keeps accepting turns while Postgres or Redis is down.
package intake
