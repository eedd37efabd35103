// Package api is intake's HTTP surface: POST a turn, read a turn, list a session's turns, cancel a
// turn. The OpenAPI 3.1 document in pkg/openapi describes it, and the tests check every request and
// response against it.
//
// A POST runs, in order, cheapest first, and nothing reaches Kafka until every step passed:
//
//  1. Authentication: `Authorization: Bearer <API key>` → tenant (401 unauthenticated otherwise).
//     Keys are looked up by SHA-256 in Postgres and cached 30s (misses 5s; Config.KeyTTL and
//     KeyMissTTL), so a revoked key stops working within 30s; a key seen a moment ago keeps
//     working while Postgres is down. Unauthenticated requests cannot each cost a lookup: a key
//     without the shape of a real one is refused without one, and lookups that miss spend the
//     client address's budget (Config.KeyMissPerClient, 5/s; past it that address's uncached
//     keys get 429) and the replica's (Config.KeyMissRate, 50/s; past it uncached keys get 503).
//     The client is the peer, or what a trusted proxy (TURNSTILE_TRUSTED_PROXIES) put in
//     X-Forwarded-For; an IPv6 client is its /64. One address's flood spends only its own budget,
//     so a real tenant's key this replica has never seen is still looked up.
//     The scheme is matched case-insensitively (RFC 9110). With TURNSTILE_AUTH=off every request is tenant "default"
//     (intake logs a loud warning at start).
//  2. Validation: session ID, content type (JSON; `application/x-www-form-urlencoded` too, because
//     `curl -d` sends it, with the body still parsed as strict JSON), body size, strict JSON (no
//     unknown fields, one object), input.text present, known multitask, nothing Postgres cannot
//     store (no NUL in the input or the metadata, metadata at most MetadataMaxDepth deep),
//     deadline, turn_id. 400/413/415/422 with a stable problem type.
//  3. Admission: 503 + jittered Retry-After when the backlog age is over TURNSTILE_MAX_BACKLOG_AGE,
//     or when the deadline is nearer than backlog age + TURNSTILE_MIN_USEFUL_TIME (the turn would
//     expire before it starts). The age comes from Config.BacklogAge; nil means unknown: admit.
//  4. Tenancy, by construction: the session is stored and routed under its key,
//     a wire.SessionKey (wire.NewSessionKey(tenant, session ID)) — the Kafka record key, the Redis
//     keys and the Postgres rows — so a session ID another tenant uses names that tenant's own
//     session, and nothing is looked up to keep tenants apart (Postgres being down cannot weaken it). Listing a
//     session lists the asking tenant's own session of that ID; another tenant's turn is
//     answered 404, as an unknown one is.
//  5. Quotas: 429 + Retry-After when the tenant is over its rate (GCRA via go-redis/redis_rate, so
//     every replica shares one budget) or has TURNSTILE_MAX_QUEUED_TURNS queued turns (a count in
//     Postgres, cached per tenant for a second). Redis or Postgres down: admit and count. A
//     replica leases a tenant's tokens from Redis in small chunks and spends them locally; one
//     request at a time fetches the next chunk while the others wait for it.
//  6. Double-texting: multitask=reject answers 409 while the session has a queued or running turn
//     other than this one (a retry of itself does not count).
//  7. Idempotency: Idempotency-Key (or a client-minted turn_id) gives the turn ID deterministically
//     (UUIDv5 of tenant, session and key; for a turn_id, wire.ClientTurnKey of tenant and it, so
//     another tenant's equal turn_id is another turn, while the API shows the client's ID), with
//     no round trip. To refuse the same key with another
//     body (422), intake keeps SHA-256(session, body) with the first request's stream token in Redis
//     under the turn ID (one SET NX GET, TTL TURNSTILE_IDEMPOTENCY_TTL); a repeat with the same body
//     gets the recorded token, so every retry gets byte-identical 202 bodies (until that token
//     expires: a retry after TURNSTILE_STREAM_TOKEN_TTL gets a fresh one). Redis was chosen over
//     the queued row because the row is written asynchronously after Kafka's ack and concurrent
//     retries would race it. When Redis is down the check fails open: retries still map to one
//     turn (the worker's claim runs it once), only the 422 and the identical token are lost.
//     Keeping the record in Postgres instead (before the produce, group-committed) was measured
//     slower than the autopipelined Redis SET (docs/BENCHMARKS.md, Intake), and recording it in
//     the queued row before the produce would leave a `queued` row behind for every turn Kafka
//     never took, holding up the backlog age and double-texting for good.
//  8. Produce, waiting at most TURNSTILE_PRODUCE_TIMEOUT for the acknowledgement; then 503. A
//     record still in flight then may land later: the client's retry with the same key is the same
//     turn, and the claim dedups it.
//  9. After the ack: the turn's queued row goes to the batched recorder; multitask=interrupt
//     requests cancellation of every live turn of the session accepted before this one (the running
//     one stops at its worker's next lease renewal, queued ones end as cancelled at their claim),
//     so this turn runs next. Then 202 with Location, stream_url and stream_token.
//
// Cancel (POST /v1/turns/{id}/cancel) and reads are never refused for capacity. Cancel is
// idempotent: it sets cancel_requested on a live turn and reports the final status of a finished
// one. Reads and cancel need Postgres; without it they answer 503 store-unavailable, never a
// misleading 404. A turn accepted a moment ago whose queued row is still in this replica's buffer is
// found: a miss flushes the buffer and reads again.
//
// Files by concern: handler.go (Config and its defaults, New, routes), refuse.go (the one way a
// request is refused: a problem type of pkg/httpx's catalog, counted, with the Retry-After its
// status calls for), auth.go (API keys), validation.go (the body, deadline and turn ID), storable.go
// (what Postgres can hold), admission.go (rate leases, the queued-turn quota, double-texting
// checks), ratekeys.go (the rate limiter's keys under TURNSTILE_KEY_PREFIX), idempotency.go,
// turns.go (the four handlers). The SQL lives in pkg/turnstore.
package api
