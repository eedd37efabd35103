// Package lease holds what the worker adds to package turnstore's statements on a turn's row (the
// one owner of the turns schema): the batched claim that takes a lease with a fencing token, the
// batched completion, the isolation of a bad row, and the Renewer that keeps the running attempts'
// leases alive. A Store runs those statements as one worker — its owner name, lease duration and
// attempt limit — and holds the logic around them: splitting batches into rounds, running a
// statement again, isolating a bad row, and turning the statements' rows into each request's
// outcome. Expire records a turn expired before its claim from the same encoding of the envelope
// as the claim. The single statements that need none of this (release, an attempt's error, finish,
// the final outcome, the dead-letter mark, the history read) the worker calls on turnstore.Store
// directly, as are the claim's outcomes (turnstore.ClaimAcquired and the rest) and
// turnstore.ErrFenced.
//
// The fencing token comes from one global sequence, so it only grows. Every statement that changes a
// claimed turn names the token it holds; a statement with a stale token matches no row and returns
// turnstore.ErrFenced, so a worker that paused past its lease ("zombie") changes nothing when it
// wakes.
//
// Completion and the session-history append are one statement (data-modifying CTEs run in one
// implicit transaction), so a turn is marked done and its messages appended together or not at all.
//
// ClaimMany and CompleteMany are the same statements for many turns at once: the requests travel as
// arrays (unnest), every row keeps its own conditions — the claim's lease rules, the completion's
// token — and every request gets its own outcome back in the same round trip (for a claim that took
// nothing, the row as it was; for a completion, turnstore.ErrFenced or the sequence number of the
// messages it appended). Every row is reached by a probe on its primary key, so a batch costs the same however
// large the tables and whatever their statistics (turnstore's TestStatementsProbeByKey). Rows are
// locked in key order (turn_id, session_id), so two statements that share rows cannot deadlock; a
// statement aborted by a deadlock or serialization failure changed nothing and runs again; two
// requests for one turn go to consecutive statements, as two calls would. A claim batch that
// Postgres refuses for its data (one bad row) is claimed row by row, so one poison record cannot
// fail the claims of the turns batched with it; that row's own claim fails with an error
// IsUnstorable recognises, and the claim of its Storable form (no NUL in the input, no metadata)
// gives the turn a row whose attempts and error record what became of it. The worker sends its
// claims and completions through group-commit batchers (package batch); Claim and Complete remain
// for single calls.
//
// A claim also returns the session's history sequence number (sessions.last_seq): a session's turns
// run one at a time, so that is the history the acquiring attempt will see, and the worker's history
// cache uses it to skip a read.
//
// A Renewer keeps the leases of every attempt running on this worker alive with one Renew
// statement per heartbeat, whatever the number of attempts. It cancels an attempt's context with
// ErrLeaseLost when its lease is gone (fenced, or expired unrenewed while Postgres was unreachable:
// until then the attempt runs on) and with ErrCancelRequested when the turn's cancel was requested.
// It follows pkg/lifecycle: Start returns at once, Stop waits for the loop.
package lease
