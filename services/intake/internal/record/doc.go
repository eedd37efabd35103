// Package record writes a `queued` row to Postgres for every turn intake accepted, after Kafka
// acknowledged it, so status reads, double-texting, quotas and the backlog signal see turns no worker
// has claimed yet.
//
// Decisions:
//   - Asynchronous and batched: Add never blocks a request; a background loop flushes at most
//     TURNSTILE_QUEUE_FLUSH_INTERVAL after the first waiting row (or at MaxBatch rows) in one
//     multi-row statement, and its timer runs only while rows wait. A timer rather than group
//     commit (flush as soon as the previous statement returns): nothing waits for these rows, so
//     the interval costs no request any latency, and fuller batches cost Postgres less per row
//     where it shares the cores with intake. Postgres is not on the accept path (static
//     stability): when it is down, or the buffer is full, rows are dropped and counted in
//     turnstile_intake_queued_rows_dropped_total. The turn is still durable in Kafka and the
//     worker's claim inserts its row when it starts.
//   - One statement per flush (turnstore.Store.InsertQueued), on a session of its own with
//     synchronous_commit off: the row is best-effort by design, so not waiting for the WAL flush
//     is safe, and it is what makes the writes cheap beside the accept path. The recorder opens
//     its own one-connection pool from the pool it is given, with the setting as a session
//     parameter, so no statement in the flush's transaction has to set it (SET LOCAL or
//     set_config would be one more statement per flush).
//   - The row carries everything the turn's Kafka record holds (identity, tenant, input, metadata,
//     multitask strategy, deadline, accepted_at, traceparent) and where the record went (partition,
//     offset, the topic's ID), so a turn whose record the broker lost is produced again from the
//     row (package redrive), and a session's turn list shows the input of unclaimed turns. The
//     metadata is encoded here, in the loop, not on the request path.
//   - INSERT … ON CONFLICT DO NOTHING: a worker that claimed the turn first (or a cancel that
//     created the row) wins; the queued row never overwrites progress. A row writes its session's
//     row only when asked (Row.NeedSession; intake does not ask: a session is its tenant's by its
//     key).
//   - Record is Add for a caller that must not answer before the row is written: intake's accept
//     path in an installation of several agents, where a session's later turn may be claimed by
//     another agent's lane and keeps the session's order only against rows it can see. A waiting
//     row is written at once with whatever else waits (group commit), so the wait is one
//     statement, not the interval. While the last statement failed, Record does not wait (the
//     row is added as by Add and the wait counted as skipped in
//     turnstile_intake_queued_rows_waited_total): an outage costs one request one WriteTimeout,
//     and intake keeps accepting at full speed.
//   - Flush lets a caller that must read its own writes (cancel, interrupt) push pending rows out.
package record
