// Package redrive keeps invariant 15 (docs/ARCHITECTURE.md): nothing accepted is lost with a
// broker's records. A Redriver finds the accepted turns whose Kafka record can no longer be consumed and
// produces their records again from what Postgres holds, in acceptance order; and it ends the
// unfinished turns that can no longer start, so neither holds up the backlog signal nor blocks its
// session for good.
//
// How a lost record is recognised. Every queued row (package record) holds what its record holds
// and where the record went: partition, offset, and the ID of the topic's incarnation, which
// intake reads before it produces (so the recorded ID is that of the incarnation the record went
// to, or an older one, never a newer one). Each round reads the topic's current ID and its
// partitions' start and end offsets (Metadata and ListOffsets; kfake, the embedded broker,
// answers both, with a fresh random topic ID each time it starts) and takes the unfinished turns
// (queued, or running under an expired lease) whose record:
//   - went to another incarnation of the topic: a recreated topic, or a restarted embedded broker,
//     which keeps records in memory only;
//   - lies below its partition's start offset (retention deleted it), in a partition the topic no
//     longer has, or at or above its partition's end offset although it was acknowledged before
//     the offsets were read (Grace after its acceptance): a truncated log;
//   - went to a place intake did not know (the topic's ID unknown, or a row from before migration
//     00100): such a turn is taken once it is UnknownAfter old.
//
// Every rule errs only towards producing a record that was not lost, and that is harmless: the
// worker's claim makes a duplicate a no-op (DONE, or LEASED while the first runs). Per-session
// order does not depend on the records' order either: the claim refuses a turn while an earlier
// accepted turn of its session is not terminal (pkg/turnstore, claim.sql), and the worker holds
// such a record until that turn has ended (consume.Defer). So a turn accepted after the broker
// restarted, whose record precedes the re-driven ones, waits for them.
//
// What else a round does: it ends the turns that can no longer start — past their deadline
// (expired) or with a cancel requested (cancelled) — and publishes their terminal events when
// Redis answers (package announce); it fails, with a clear error, an orphan: a lost turn whose row
// does not hold its input (written before migration 00100), which cannot be re-driven. Each
// orphan is logged at error level and counted in turnstile_intake_redrive_orphans_total, which
// the Helm chart's PrometheusRule alerts on. None of these turns is backlog meanwhile
// (turnstore.Store.BacklogAge skips turns past their deadline or cancelled), so an orphan never
// makes intake answer 503 to everyone.
//
// Decisions:
//   - It runs in the intake role, beside the backlog monitor: intake does not scale to zero with
//     the workers, and it holds the producer the records go through. Every intake replica runs
//     one; they share the work through the rows (a re-driver takes a row by setting redriven_at,
//     with FOR UPDATE SKIP LOCKED), and a row re-driven less than Hold ago is not taken again.
//   - Rounds every TURNSTILE_REDRIVE_INTERVAL (default 5s), the first at Start, so a restarted
//     stack re-drives at once. A round that cannot read the topic's state re-drives nothing (it
//     cannot judge) and still ends the turns that can no longer start.
//   - Start and Stop log what happens to queued turns: at Start, how many accepted turns are
//     unfinished and how many of them were re-driven; at Stop (Report), how many are unfinished
//     and that those whose records are lost will be re-driven at the next start.
package redrive
