// Package execute runs one turn record to its end: decode, deadline check, claim, the agent attempt
// under a renewed lease, fenced publishing of every event, and the fenced completion — with retries
// up to the attempt limit, dead-lettering of poison, cancellation, and handing the turn off on drain.
//
// The turn path is a chain of stages, each a func(next handler) handler in the manner of HTTP
// middleware, assembled in one place (Executor.stages, path.go):
//
//	decode → repeat → expireEarly → claimLease → runAttempt
//
// decode opens the record's turn (an undecodable record is dead-lettered); expireEarly records a
// turn that can no longer be useful as expired without a claim; claimLease takes the turn's lease
// and fencing token, or ends the turn's way as the claim's outcome says (finished, deferred behind
// an earlier turn of its session, cancelled, out of attempts); runAttempt runs the attempt that
// lease makes. A stage either hands the turn to next or returns what becomes of its record; repeat
// runs the stages after it again while a pass ends with the turn going on (another worker holds
// it, the claim failed, or an attempt failed or lost its lease), so every claim is preceded by the
// deadline check. A new concern — routing a turn to an agent, a tenant's share, a budget check —
// is one stage added to that list, where it sees the turn as the stages before it left it.
//
// Deadlines are checked before any claim: a turn whose remaining time is below the minimum useful
// time is recorded expired without ever being attempted (no attempt, no start time, only
// turn.expired). Once started, the agent's context carries the deadline, and a turn that overruns it
// fails with "deadline exceeded" without a retry.
//
// Handle, the path's entry, is a consume.Handler: it returns consume.Commit when the record may be
// committed and consume.HandOff when the draining worker released the turn. Each claim that
// acquires the turn's lease makes an attempt: one value holding the record, the envelope, the attempt number and
// fencing token, the sink that publishes under that token, the attempt's context and its start.
// Its steps (history, earlier attempts' events, the agent, the completion) stop at the first that
// fails; one function (verdict) names the outcome from where and why they stopped, and the
// attempt's method for that outcome — succeeded, expired, cancelled, overran, unavailable, failed, lost,
// handOff, retry, stalled — does what the outcome needs and nothing else. A turn that ends without
// running (expired before its claim, cancelled or out of attempts, or found finished) publishes
// its end through an attempt made the same way, under the token of the statement that ended it.
//
// The hot-path calls — the claim, the fenced publishes, the completion — go through three
// one-method interfaces (Claimer, Publisher, Completer) whose method is a batch.Batcher's Do: the
// worker passes its group-commit batchers (package batch), so many turns share one round trip for
// each while each turn still waits for its own result, in its own order; a batch.Func over the
// lease store's ClaimMany or CompleteMany is the same call unbatched. The attempt's lease is
// renewed by lease.Renewer, which cancels the attempt's context when the lease is lost or the
// turn's cancel is requested.
//
// A turn publishes a group of events at a time, each group after the previous one was accepted, and
// a group stays whole and in order in one call of the publish script, so batching never reorders a
// turn's events. turn.started (with turn.retrying) is held back for up to heldLinger, and so are
// the agent's deltas in that time: when the linger runs out, or the agent flushes the sink as it is
// about to call its upstream (agent.Flusher), they go out as one group, and an agent that finished
// before that has them published as it returns, beside the completion's commit, with turn.completed
// behind them once the completion committed and they were accepted. So a quick agent's first delta
// does not wait for the completion's commit, and a model's turn.started never waits for the linger.
// The price is a second publish group (a script call in Redis) for every quick turn, so it is paid
// only while the publish batcher is idle (Idler: a flusher free, nothing queued): a busy publisher
// would delay the group anyway, and under a load that keeps it busy the held events go out with
// turn.completed as one group, which keeps the throughput of quick turns. A tool call or tool result takes the held events with it and is
// published before the agent's call returns. The held events are published before anything else
// the attempt publishes and before its terminal event, hand-off or retry (a fenced attempt drops
// them), and if they are refused the agent's later events are refused too, so no stream shows an
// attempt's events without its turn.started. A terminal event is published once the turn's row is
// terminal, when nothing but the publish is left to retry, so it (with what of the held events
// Redis did not take) keeps trying through a Redis outage of up to terminalPatience (30 s) where
// other events try five times.
//
// An attempt's sink is an agent.Waiter: a wait of the agent on its upstream is published as
// turn.waiting and logged at info level (a wait that repeats one announced, an unavailable upstream
// tried again, only at debug level). An agent whose upstream stayed unavailable until the deadline
// left only the minimum useful time returns agent.ErrUnavailable: the turn fails naming the wait,
// without another attempt or a dead letter. Drain, called as the worker's drain begins, hands off at
// once the turns that only wait (on their upstream, before their next attempt, or on a turn another
// worker holds); running turns keep the drain's grace period.
//
// Handle returns only when the record may be committed (the turn is terminal, here or elsewhere),
// when the worker is draining (the turn was handed off and must not be committed), or when the
// claim found an earlier accepted turn of the session not terminal (turnstore.ClaimBlocked): the turn must
// not start before it, so the record is deferred (consume.Defer) and handed back later. That check
// is the claim statement's, so a session's order holds even when the earlier turn's record was
// lost and is re-driven behind the later one. While another
// worker holds a live lease on the turn, Handle waits for it: the turn's session stays blocked, which
// is what keeps a session's turns in order across rebalances and crashes.
//
// New takes one Config that names every collaborator: the lease store (batched claim and
// completion), turnstore for the single statements on a turn's row, the publisher, the agent, the
// lease renewer, the logger, the hooks, and a DeadLetterer — one method, the worker's
// deadletter.Producer — that poison records are written to. The executor knows nothing of the
// consumer that hands it records, so the worker builds the executor first and the consumer after.
//
// A record whose data Postgres refuses fails its claim every time; each such claim counts as a
// failed attempt of the turn (claimed in its lease.Storable form), so the poison rule ends it
// failed and dead-lettered (reason unstorable) instead of retrying the claim for ever.
package execute
