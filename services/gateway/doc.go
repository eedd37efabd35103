// Package gateway is turnstile's gateway role: it relays each session's Redis Stream to browsers
// over Server-Sent Events with gap-free Last-Event-ID resume, sharing one Redis reader per session
// among all of a replica's clients (see internal/hub and internal/sse), and serves the demo chat
// page at "/" (internal/web).
//
// Redis connections per replica are bounded whatever the number of clients: one Pub/Sub
// connection plus the shared command pool. An idle HTTP/1.1 stream owns no goroutine (it parks
// until something wakes it, see internal/sse), so a replica's cap of streams costs a few KiB each;
// HTTP/2 cleartext is served on the same port for proxies that multiplex streams upstream. Stream tokens are checked when TURNSTILE_AUTH=on (a
// valid token for another session answers 404, like a missing session); caps, CORS, keep-alives,
// retry hints and drain are configured by the TURNSTILE_GATEWAY_* settings.
//
// With TURNSTILE_AUTH=on, revoking an API key ends its stream tokens within seconds: a watcher
// (internal/revoke) reads the revoked keys from Postgres once per interval for the whole replica,
// new streams of a revoked key get 401 and open ones end with stream.revoked. One tenant's streams
// hold at most TURNSTILE_GATEWAY_MAX_TENANT_SHARE percent of the replica's cap.
//
// It keeps serving live streams while Kafka or Postgres is down: neither is on its path (the
// revocation watcher keeps what it knows and reads again when Postgres answers).
package gateway
