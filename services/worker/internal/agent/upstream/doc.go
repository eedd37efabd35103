// Package upstream protects what agents call — a model API, a user's HTTP service, a remote A2A
// agent — and protects the worker from it.
//
// One Guard per upstream combines three mechanisms, and balances over the upstream's replicas when
// it has a Picker (package pool): its limit and budget are then the upstream's total, and each
// endpoint (a Target) has its own adaptive limit and retry budget inside it — an endpoint's 429/503
// shrink only its own limit, and a retry after its failure spends from its budget and the total:
//
//   - an adaptive concurrency limit (Limiter) that grows by about one slot per window of calls that
//     succeed within a latency target and is multiplied down when the upstream says it is overloaded
//     (429, 503). One overload signal per window shrinks it once: the calls already in flight when the
//     limit shrank do not shrink it again, so a burst of refusals does not collapse it to its minimum;
//   - a retry budget (Budget): retries may spend at most a fixed share of first attempts, plus a small
//     reserve refilled at a steady rate, so a chain of agents that each retry cannot multiply load on
//     an upstream that is failing. A transient failure with the budget spent fails the turn; an
//     overload refusal instead waits for the budget (until the deadline), so overload delays turns
//     but does not fail them;
//   - one error classifier (Classify) that says of every error whether it is an overload signal, a sign
//     that the upstream is unavailable, worth a retry, or terminal. Terminal client errors (400, 401, 403, 404, 422) are agent.ErrPermanent so the
//     worker fails the turn at once instead of spending attempts. An error the upstream reports inside
//     a stream it had begun with 200 (StreamError) is classified like the HTTP status it stands for
//     when the upstream names one: an in-stream 401 or 403 is permanent, an in-stream 429 an overload
//     signal, an in-stream 500 a transient failure.
//
// # One retry layer
//
// A turn's failed calls are retried in one place, never in two that multiply. The guard retries a
// call that failed before it passed any output to the sink, on the turn's first attempt, up to
// MaxRetries times. When it gives up (retries or budget spent, or the next try would start after the
// deadline) the error is a GaveUpError carrying the upstream's last answer; it matches
// agent.ErrPermanent, so the worker fails the turn with that answer in turn.failed rather than
// starting attempts that would repeat the same retries. The worker's attempts retry what the guard
// cannot: a call that failed after it had streamed output (its events are published; the next attempt
// sees them as agent.Turn.Prior), and a worker that crashed, lost its lease or drained. A later
// attempt is itself a retry, so the guard does not retry its failed calls again: the worker decides
// on the next attempt.
//
// So one model call of a turn (a tool round is another call) sends its upstream at most
//
//	MaxRetries + max_attempts
//
// requests for failures — 1 + MaxRetries on the first attempt and one on each later attempt, 6 with
// the defaults (3 and TURNSTILE_MAX_ATTEMPTS=3), where each attempt retrying in place would have sent
// 3 × 4 = 12. Overload refusals are not failures: they wait for the upstream's Retry-After (or its
// "try again in …" hint, or the backoff), the budget and a slot of the shrunken limit, and end at the
// deadline with an error naming the refusal, not the deadline.
//
// # An unavailable upstream is a wait
//
// Nor is an upstream that cannot be reached a failure of the turn: a refused or failed connection,
// a name that does not resolve, a connect timeout (Unreachable), or a 502 or 504 from a proxy in front
// of it, before the call passed any output on. The guard tries the call again, on any attempt, after
// a pause that doubles from Backoff up to 64 times it (with jitter), and honours a Retry-After. The
// retry budget paces these tries rather than ending them: each spends a retry while the budget holds
// one, and while it is spent a try waits the longest pause, so a long outage of many turns costs the
// upstream about one connection per turn every few seconds and each turn gets through within a pause
// of the upstream's return. The last try is made when the deadline leaves Config.MinUseful (the
// worker's minimum useful time), and when it fails too the call ends with a GaveUpError that names the
// wait ("upstream_unavailable after 7 requests over 3.9s: … connection refused (no retry: …)") and
// matches agent.ErrUnavailable: the worker fails the turn with it, without another attempt or a dead
// letter. The limit does not shrink (an unreachable upstream says nothing of its capacity); a pool
// counts the failures towards the endpoint's ejection, and sends the try after a refused connection
// to another endpoint when it has one.
//
// The wait is announced (reason upstream_unavailable, with the tries so far) as it begins and again
// at the 2nd, 4th, 8th … try, not at every try: the others reach the sink as a Repeat, which the
// worker logs at debug level without publishing anything.
//
// # Waits are visible
//
// A turn that waits on its upstream — the limit is full, it was refused, it pauses before a retry —
// says so: the guard announces each wait to the turn's sink when it is an agent.Waiter, with its
// reason and the time of the next try, and the worker publishes turn.waiting and logs the wait at
// info level. While a turn only waits, a drain hands it off at once instead of letting it sit out the
// grace period. Just before each request the guard flushes the sink when it is an agent.Flusher: an
// upstream answers later than the worker holds turn.started back for a quick agent, so the user
// sees turn.started while the request is under way rather than a few milliseconds into it.
//
// A turn that finds the limit full waits for a slot rather than failing. It waits inside the agent
// call, so it keeps holding the worker's in-flight slot: when all of them wait, the consumer has no
// capacity left and stops fetching, and the backlog stays in Kafka where the scale signal sees it.
//
// A Retry-After the upstream sends is honoured only when the pause ends before the turn's deadline;
// otherwise the call fails now, since a retry could not finish in time (an unavailable upstream is
// tried once more when the deadline leaves the minimum useful time). A call that already emitted
// output to the sink is never retried here (its events are published); the worker's next attempt
// sees them as agent.Turn.Prior instead.
package upstream
