// Package peer measures the same no-op work — enqueue, execute once, record completion — through
// turnstile and through River (a Postgres job queue) on the same Postgres, machine and run, and
// reports the ratio; and through the floor, the least a pipeline of turnstile's shape does per turn
// written with the raw clients (Floor), so the run also says how much of the gap is turnstile's own
// work and how much the engines it stands on.
//
// Decisions:
//   - Both queues are filled first and drained second, and the rate is taken between 10% and 90%
//     completion, so neither side is charged for start-up (River's leader election, a Kafka group
//     join) or for the enqueue path; the rate is the pipeline's drain capacity. Finished jobs are
//     counted in process every 10 ms and the 10% and 90% crossings interpolated between polls:
//     River's from its own job-completed events (subscribed before Start, sent after the
//     completer's UPDATE returned), turnstile's from the worker's succeeded-attempts counter
//     (incremented after the completion committed and turn.completed was published). Once a
//     count reaches the jobs queued, Postgres is asked once whether it holds them all as finished,
//     and the run fails if not. The count used to be a count(*) on the Postgres both systems use,
//     polled every 50 ms: a sequential scan of 10-60 ms of Postgres CPU mid-run, charged to the
//     system measured, and more to the slower side, polled more often per job.
//   - turnstile runs its real pipeline with the demo agent at its cheapest (one word, no delay):
//     claim with a fenced lease in Postgres, turn.started, one turn.delta and turn.completed through
//     the fenced publish script, the completion transaction with the session history, and the
//     offset commit. Its turns are queued straight into Kafka as intake would write them.
//   - By default no Postgres row precedes a turn's claim, so the claim inserts the row (and the
//     completion the session's row): the path a turn takes in production only when intake could
//     not record it. With Options.RecordQueued (-record-queued) each turn is also written as intake
//     records it (its session's owner, the turn as queued) before the drain, outside the timed
//     window as River's inserts are, and each claim takes over an existing row: the production
//     path, which costs Postgres a few microseconds a turn more (docs/BENCHMARKS.md). The default
//     stays the insert, so the rows measured before the option compare with the rows after it.
//   - Each side also reports its CPU time per job over the same 10%-90% window (CPUPerJob): the
//     local Postgres and Redis servers' from /proc, the process's own from getrusage (the
//     generator, and for turnstile the in-process stack; for River its client), read every 50 ms
//     (a reading costs the generator half a millisecond) and interpolated at the crossings. Both systems are CPU-bound on a small machine, so the ratio
//     of rates follows the ratio of these costs, and the breakdown says where a gap comes from.
//     The servers' figures are whole servers (whatever else they do meanwhile).
//   - River is tuned for throughput as its authors suggest for such a test: about 1,000 workers and
//     a short fetch cooldown and poll interval. River keeps no per-session order and publishes no
//     stream; the ratio is therefore a price list, not a like-for-like race.
//   - The floor keeps what any design of turnstile's shape must do — read the turns from a Kafka
//     log, claim each with a token in Postgres, append its three events to its session's Redis
//     stream, complete it conditional on its token — and leaves out everything else turnstile does
//     (the session history, per-session order, lease renewal, the fenced publish script's epochs,
//     prev chain, trimming and TTLs, the agent interface, tracing), so it is a lower bound: its
//     statements are the cheapest that keep a fenced claim (a narrow row on its primary key), and
//     its batches (up to 256 records, four at once) are as large as the worker's at 1,000 in flight.
package peer
