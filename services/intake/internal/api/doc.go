// Package api is intake's HTTP surface: POST a turn, read a turn, list a session's turns, cancel a
// turn. The OpenAPI 3.1 document in pkg/openapi describes it, and the tests check every request and
// response against it.
//
// A POST runs, in order, cheapest first, and nothing reaches Kafka until every step passed (the one
// exception, a reused idempotency key seen first by another replica, is in step 7):
//
//  1. Authentication: `Authorization: Bearer <API key>` → tenant (401 otherwise). Keys are looked
//     up by SHA-256 in Postgres and cached 30s (misses 5s), so a revoked key stops working within
//     30s; a key seen a moment ago keeps working while Postgres is down. With TURNSTILE_AUTH=off
//     every request is tenant "default" (intake logs a loud warning at start).
//  2. Validation: session ID, content type (JSON; `application/x-www-form-urlencoded` too, because
//     `curl -d` sends it, with the body still parsed as strict JSON), body size, strict JSON (no
//     unknown fields, one object), input.text present, known multitask, deadline, turn_id.
//     400/413/415/422 with a stable problem type.
//  3. Admission: 503 + jittered Retry-After when the backlog age is over TURNSTILE_MAX_BACKLOG_AGE,
//     or when the deadline is nearer than backlog age + TURNSTILE_MIN_USEFUL_TIME (the turn would
//     expire before it starts). The age comes from Config.BacklogAge; nil means unknown: admit.
//  4. Tenancy: a session belongs to the tenant that first used it (one INSERT … ON CONFLICT on the
//     first request a replica sees for the session, cached after; when Postgres did not answer, the
//     turn's queued row records the owner instead); another tenant gets 404, as
//     for its turns, their cancel and the session's turn list: a tenant cannot even learn that
//     another's session exists.
//  5. Quotas: 429 + Retry-After when the tenant is over its rate (GCRA via go-redis/redis_rate, so
//     every replica shares one budget) or has TURNSTILE_MAX_QUEUED_TURNS queued turns (a count in
//     Postgres, cached per tenant for a second). Redis or Postgres down: admit and count. A
//     replica leases a tenant's tokens from Redis in small chunks and spends them locally; one
//     request at a time fetches the next chunk while the others wait for it.
//  6. Double-texting: multitask=reject answers 409 while the session has a queued or running turn
//     other than this one (a retry of itself does not count).
//  7. Idempotency: Idempotency-Key (or a client-minted turn_id) gives the turn ID deterministically
//     (UUIDv5 of tenant, session and key), with no round trip, and the request a hash: SHA-256 of
//     tenant, session and body. The idempotency record is the turn's own `queued` row: a keyed
//     request waits for its row (step 9) and answers from the row Postgres holds for the turn, so
//     the first request to write the row wins the key. A retry with the same body gets the same
//     202 bytes (the stream token is signed as of the row's accepted_at, so it is the same token;
//     once that has expired, a fresh one); another body gets 422. A replica remembers the rows it
//     recorded, so a retry it has seen is answered before admission (step 3) and without a
//     produce. A retry on another replica, or concurrent with the first, is
//     produced again and learns the answer from the row: a duplicate of the same body is harmless
//     (the worker's claim runs a turn once), and a record with another body is inert, because the
//     record carries its request hash and a worker's claim refuses a record whose hash is not the
//     row's (outcome SUPERSEDED: acknowledged, never run or announced). The key lasts as long as
//     the turn's row (TURNSTILE_RETENTION after the turn ended). When Postgres does not answer
//     within 250 ms the check fails open and is counted: the turn is accepted, retries still map
//     to one turn, only the 422 and the identical token are lost until Postgres is back.
//     Why the row and not a separate record: a Redis SET NX GET per keyed request (the previous
//     design) and a separate Postgres table written before the produce were both built and
//     measured (docs/BENCHMARKS.md, Intake); the row is written for every turn anyway, so using it
//     costs no extra write and no extra round trip beyond waiting for it. Writing the row before
//     the produce would leave a `queued` row behind for a turn Kafka never took whenever a produce
//     fails and the client gives up, holding up the backlog age and double-texting for good.
//  8. Produce, waiting at most TURNSTILE_PRODUCE_TIMEOUT for the acknowledgement; then 503. A
//     record still in flight then may land later: the client's retry with the same key is the same
//     turn, and the claim dedups it.
//  9. After the ack: the turn's queued row goes to the batched recorder (a keyed request waits for
//     it, see step 7; a turn without a key does not); multitask=interrupt
//     requests cancellation of every live turn of the session accepted before this one (the running
//     one stops at its worker's next lease renewal, queued ones end as cancelled at their claim),
//     so this turn runs next. Then 202 with Location, stream_url and stream_token.
//
// Cancel (POST /v1/turns/{id}/cancel) and reads are never refused for capacity. Cancel is
// idempotent: it sets cancel_requested on a live turn and reports the final status of a finished
// one. Reads and cancel need Postgres; without it they answer 503 store-unavailable, never a
// misleading 404. A turn accepted a moment ago whose queued row is still in this replica's buffer is
// found: a miss flushes the buffer and reads again.
package api
