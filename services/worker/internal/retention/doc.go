// Package retention deletes finished turn rows once they are older than TURNSTILE_RETENTION, and
// the session rows left without turns.
//
// A Cleaner runs in every worker. Each round deletes rows whose finished_at is older than the
// retention, at most one batch (TURNSTILE_RETENTION_BATCH) per statement and batch after batch until
// a short one, so no statement holds many row locks or runs long; it then waits
// TURNSTILE_RETENTION_INTERVAL. Rows are picked with FOR UPDATE SKIP LOCKED, so the cleaners of
// several workers share the work instead of queueing behind each other. Queued and running turns,
// and failed turns still owed to the dead-letter topic, are never deleted, and the session history
// (session_history) is kept: it is the conversation, not bookkeeping.
//
// After the turns, each round deletes the session rows that no turn row refers to any more and
// that were last updated more than the retention ago (same batches, same locking), so sessions
// used once do not keep a row for good. A session with a live turn, or claimed within the
// retention, stays.
//
// A turn row is what tells a worker that a redelivered record already ran (the claim answers DONE),
// so the retention must exceed how long a record can still be delivered: the Kafka topic's
// retention and any replay an operator might do. The default (7 days) matches Kafka's.
package retention
