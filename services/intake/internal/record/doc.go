// Package record writes a `queued` row to Postgres for every turn intake accepted, after Kafka
// acknowledged it, so status reads, double-texting, quotas and the backlog signal see turns no worker
// has claimed yet.
//
// Decisions:
//   - Asynchronous and batched for a turn without an idempotency key: Add never blocks a request; a
//     background loop flushes at most TURNSTILE_QUEUE_FLUSH_INTERVAL after the first waiting row (or
//     at 500 rows) in one multi-row statement, and its timer runs only while rows wait. Nothing
//     waits for these rows, so the interval costs no request any latency, and fuller batches cost
//     Postgres less per row on a machine where it shares the cores with intake.
//   - Group commit for a keyed turn: the row is the idempotency record (see package api), so Record
//     waits for it and returns the row Postgres holds for the turn — this request's, or the one
//     written first by a retry, a worker's claim or a cancel. A waiting row is written at once with
//     whatever else is buffered; while that statement runs the next batch gathers, so under load a
//     batch holds what arrived during one round trip. The statement returns the keyed rows it wrote;
//     a keyed turn that had a row already is read back in a second statement, which only retries
//     and concurrent duplicates pay. DISTINCT ON keeps the earliest of several rows of one turn in
//     a batch.
//   - One statement per flush on a session of its own with synchronous_commit off: the row is
//     best-effort by design (the turn is durable in Kafka and its claim records it), and not waiting
//     for the WAL flush is what keeps these writes cheap. The recorder opens its own one-connection
//     pool from the pool it is given, with the setting as a session parameter, instead of a SET
//     LOCAL in every transaction: that statement was a fifth of Postgres's cost per row in the
//     small batches a few waiting requests make. Postgres is not on the accept path (static
//     stability): when it is down, or the buffer is full, rows are dropped and counted in
//     turnstile_intake_queued_rows_dropped_total (a waiting keyed request fails open), and the
//     worker's claim inserts the row when it starts.
//   - The row carries identity, tenant, timestamps, deadline and the request hash, not the input:
//     nothing reads the input before the claim, which writes it from the Kafka record. That keeps
//     each row small.
//   - INSERT … ON CONFLICT DO NOTHING: a worker that claimed the turn first (or a cancel that
//     created the row) wins; the queued row never overwrites progress. A row records its session's
//     owner only when intake could not record it before accepting the turn (Postgres did not answer
//     then): otherwise that upsert was a quarter of the statement's cost.
//   - Flush lets a caller that must read its own writes (cancel, interrupt) push pending rows out.
package record
