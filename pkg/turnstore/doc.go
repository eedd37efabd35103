// Package turnstore is the one owner of every statement over the turns schema: the turns,
// sessions and session_history tables and the cancel notifications Postgres sends about them
// (the tables themselves are package migrations'). No other package of a service writes SQL over
// them; each calls a method of Store.
//
// Every session_id a statement takes or stores is the session's key, a wire.SessionKey (tenant and
// session ID together; its String form is the column's value), and a turn whose ID the client minted is stored under
// wire.ClientTurnKey, with the client's ID in turns.client_turn_id for the API to show.
//
// Its users:
//   - intake's API: a turn's status and a session's turns (Get, ListSession), cancel requests
//     (RequestCancel), and its acceptance and backlog statements;
//   - intake's queued-row recorder (package record): InsertQueued;
//   - intake's re-driver (package redrive): TakeLost, Redriven, Release, EndUnstartable,
//     FinishUnleased, CountUnfinished;
//   - the worker's lease store (package lease): ClaimTurns, RenewLeases, ReleaseLease,
//     EndAttempt, CompleteTurns, FinishTurn, FinishUnleased, ExpireTurn, ReadFinal,
//     ClearDeadLetter, ReadHistory;
//   - the worker's history cache (package history): ReadHistoryAfter;
//   - the worker's housekeeping: DeleteFinished (package retention), ListenCancels (package
//     cancelwatch), TableStats and Vacuum over HotTables (package vacuum).
//
// The load generator (module loadtest) keeps its own statements: its check reads a run's results
// to cross-check them, and its peer seeds queued rows as intake writes them and measures a floor on
// a table of its own. They are a test harness reading and preparing data, not users of the rules
// kept here.
//
// # Layout
//
// Statements are grouped in files by concern: claim.go (taking leases), renew.go (renewing and
// releasing them, and ErrFenced), complete.go (succeeding a turn and appending its history),
// finish.go (every other end of a turn, and reading it back), cancel.go, redrive.go, history.go,
// queued.go, retention.go, notifications.go (what a turn's first write stores for its
// notifications, and the task a turn belongs to), notify.go and vacuum.go. Each statement is one method of Store. A short statement is written
// where it is run; a long one lives in a .sql file of the same name next to its Go file, embedded
// with //go:embed, and the doc comment of its variable says why it is written as it is (its plan,
// its lock order). A fragment that several statements share (locked_turns.sql, the lock-ordered
// probe of held turns) or that one statement takes only sometimes (queued_sessions.sql) is a file
// of its own, spliced in where the statement has the line "-- include: <file>" (push_configs.sql,
// which the queued, claim and expiry statements share, is one).
//
// A statement over many turns takes its requests as column arrays of package pgarray's types in a
// Params struct (sent in binary, one element per turn), and returns one value per row or per
// request. The logic around the statements is the callers': splitting a batch into rounds,
// running a statement again after a deadlock, isolating a row Postgres refuses, deciding each
// request's outcome from the rows, timeouts. A Store is safe for concurrent use and holds nothing
// but its pool, so each user makes its own over the pool it is given.
//
// # Outbox
//
// turnstore writes every row its statements change, with one exception: the outbox trigger
// turns_outbox (migration 00140, as 00170 left it) writes a turn's notifications
// (turn_notifications) for every status change of the turn, inside the statement that makes it.
// It is a trigger so that "a state change and its notification are one fact" holds for every
// statement that changes a status — a claim, a completion, a failure, a cancel, an expiry, and
// any statement added later — without each having to remember it. What it reads is written by
// turnstore's own statements: the turn's webhook (webhook_url, webhook_token) and task (task_id),
// and the task's push configs (task_push_configs), all stored by the statement that writes the
// turn's first row (Notifications), from the envelope's fields. Retention (DeleteFinished)
// deletes a turn's notifications and its task's configs in its own statement. The other trigger
// on turns, turns_cancel_requested (migration 00010), writes nothing: it sends the NOTIFY
// ListenCancels hears. One trigger on task_push_configs, task_push_configs_bound (migration
// 00180), holds a task's configs to TURNSTILE_PUSH_CONFIGS_MAX for every statement that stores
// them: it locks the task, counts, and skips a new config past the bound, so a claim never fails
// for a follow-up's configs (push_configs.sql). DeleteIdleThreads deletes the LangGraph threads
// idle past their TTL, for the workers' retention cleaner.
//
// Errors are wrapped with a short phrase of what was being done; ErrFenced (the fencing token a
// statement names is no longer the turn's) and ErrNotFound are the conditions callers branch on.
package turnstore
