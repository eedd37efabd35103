// Package a2a is turnstile's A2A role: an A2A server (protocol 0.3, JSON-RPC, as the a2a-go SDK
// speaks it) whose tasks are queue-backed turns, so any agent behind turnstile scales out,
// survives worker crashes and resumes streams, with no task store of its own.
//
// It is a stateless translator in front of turnstile's native API (pkg/frontdoor): sends go to
// intake (which needs only Kafka), streams come from the gateway (which needs only Redis); reads,
// cancels, resubscribes and a follow-up message to a task waiting for input first look the task up
// through intake (Postgres). Every call carries the caller's Authorization header, so auth,
// tenancy (another tenant's task is "task not found"), quotas, idempotency, stream cursors and
// drain hold here by construction. Every replica serves every task, and the Agent Card from
// configuration alone.
//
// Routes: POST /a2a (JSON-RPC: message/send, message/stream, tasks/get, tasks/cancel,
// tasks/resubscribe; see internal/rpc) and GET /.well-known/agent-card.json (internal/card). The
// mapping of tasks onto sessions and turns, and of native events onto A2A events, is in
// internal/tasks.
//
// On drain the role drops readiness and ends its open streams; clients resubscribe with the last
// event id they saw (on another replica) and miss nothing.
package a2a
