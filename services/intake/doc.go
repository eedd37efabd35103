// Package intake is turnstile's front door: it validates a posted turn, admits it or refuses it
// early and legibly, writes it to Kafka keyed by session (acknowledged by every in-sync replica
// before it answers) and answers 202 at once with the turn ID, where to stream its events and a
// stream token for the gateway. It also serves turn status, a session's turns, cancellation and the
// OpenAPI document (/openapi.yaml).
//
// Only Kafka is on the accept path, so intake keeps accepting turns while Postgres or Redis is down
// (static stability): every check that needs them fails open and is counted in
// turnstile_intake_fail_open_total{check}. The pieces:
//
//   - internal/api: the HTTP handlers, validation, admission control, idempotency, tenants;
//   - internal/record: the batched writer of `queued` rows for accepted turns;
//   - internal/backlog: the backlog-age monitor;
//   - internal/schedule: scheduled turns (the native /v1/schedules, LangGraph's crons), whose
//     ticks every replica's scheduler claims in Postgres, one replica a tick, and posts through
//     this accept path.
//
// Intake also runs the backlog-age monitor (internal/backlog) — the workers' scale signal lives in the
// role that never scales to zero — exports it as turnstile_backlog_age_seconds and as JSON at
// GET /v1/backlog for KEDA's metrics-api scaler, and hands it to admission control
// (api.Config.BacklogAge; Options.BacklogAge overrides it in tests). Each API request runs in a
// server span whose trace context goes into the Kafka record's headers (pkg/telemetry).
package intake
