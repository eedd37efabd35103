// Package record writes a `queued` row to Postgres for every turn intake accepted, after Kafka
// acknowledged it, so status reads, double-texting, quotas and the backlog signal see turns no worker
// has claimed yet.
//
// Decisions:
//   - Asynchronous and batched: Add never blocks a request; a background loop flushes at most
//     TURNSTILE_QUEUE_FLUSH_INTERVAL after the first waiting row (or at 500 rows) in one multi-row
//     statement, and its timer runs only while rows wait. Each flush is one round trip: the insert
//     and the set_config that turns synchronous_commit off go as one pgx batch, which Postgres runs
//     as one implicit transaction (BEGIN, SET LOCAL, INSERT, COMMIT were four). A timer rather than
//     group commit (flush as soon as the previous statement returns): nothing waits for these rows,
//     so the interval costs no request any latency, and fuller batches cost Postgres less per row
//     on a machine where it shares the cores with intake. Postgres is not
//     on the accept path (static stability): when it is down, or the buffer is full, rows are
//     dropped and counted in turnstile_intake_queued_rows_dropped_total. The turn is still durable
//     in Kafka and the worker's claim inserts its row when it starts.
//   - The row carries identity, tenant, timestamps and deadline, not the input: nothing reads the
//     input before the claim, which writes it from the Kafka record. That keeps each row small.
//   - synchronous_commit=off for these transactions: the row is best-effort, so not waiting for
//     the WAL flush is safe, and it is what makes the writes cheap beside the accept path.
//   - INSERT … ON CONFLICT DO NOTHING: a worker that claimed the turn first (or a cancel that
//     created the row) wins; the queued row never overwrites progress. The same statement records
//     each session's tenant on first use.
//   - Flush lets a caller that must read its own writes (cancel, interrupt) push pending rows out.
package record
