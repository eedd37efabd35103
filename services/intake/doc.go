// Package intake is turnstile's front door: it validates a posted turn, writes it to Kafka keyed by
// session (acknowledged by every in-sync replica before it answers) and answers 202 at once with the
// turn ID and where to stream its events. It also serves a turn's status from Postgres.
//
// Only Kafka is on the accept path, so intake keeps accepting turns while Postgres or Redis is down.
//
// Intake also runs the backlog-age monitor (pkg/backlog) — the workers' scale signal lives in the role
// that never scales to zero — exports it as turnstile_backlog_age_seconds and as JSON at
// GET /v1/backlog for KEDA's metrics-api scaler, and hands it to admission control
// (api.Config.BacklogAge). Each API request runs in a server span whose trace context goes into the
// Kafka record's headers (pkg/telemetry).
package intake
