// Package gateway is turnstile's gateway role: it relays each session's Redis Stream to browsers
// over Server-Sent Events with gap-free Last-Event-ID resume, sharing one Redis reader per session
// among all of a replica's clients (see internal/hub and internal/sse), and serves the demo chat
// page at "/" (internal/web).
//
// Redis connections per replica are bounded whatever the number of clients: one Pub/Sub
// connection plus the shared command pool. Stream tokens are checked when TURNSTILE_AUTH=on (a
// valid token for another session answers 404, like a missing session); caps, CORS, keep-alives,
// retry hints and drain are configured by the TURNSTILE_GATEWAY_* settings.
//
// It keeps serving live streams while Kafka or Postgres is down: neither is on its path.
package gateway
