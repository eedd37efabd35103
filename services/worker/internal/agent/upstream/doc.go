// Package upstream protects what agents call — a model API, a user's HTTP service, a remote A2A
// agent — and protects the worker from it.
//
// One Guard per upstream combines three mechanisms:
//
//   - an adaptive concurrency limit (Limiter) that grows by about one slot per window of calls that
//     succeed within a latency target and is multiplied down when the upstream says it is overloaded
//     (429, 503). One overload signal per window shrinks it once: the calls already in flight when the
//     limit shrank do not shrink it again, so a burst of refusals does not collapse it to its minimum;
//   - a retry budget (Budget): retries may spend at most a fixed share of first attempts, plus a small
//     reserve refilled at a steady rate, so a chain of agents that each retry cannot multiply load on
//     an upstream that is failing. A transient failure with the budget spent fails the call; an
//     overload refusal instead waits for the budget (until the deadline), so overload delays turns
//     but does not fail them;
//   - one error classifier (Classify) that says of every error whether it is an overload signal, worth a
//     retry, or terminal. Terminal client errors (400, 401, 403, 404, 422) are agent.ErrPermanent so the
//     worker fails the turn at once instead of spending attempts.
//
// A turn that finds the limit full waits for a slot rather than failing. It waits inside the agent
// call, so it keeps holding the worker's in-flight slot: when all of them wait, the consumer has no
// capacity left and stops fetching, and the backlog stays in Kafka where the scale signal sees it.
//
// A Retry-After the upstream sends is honoured only when the pause ends before the turn's deadline;
// otherwise the call fails now, since a retry could not finish in time. A call that already emitted
// output to the sink is never retried here (its events are published); the worker's next attempt
// sees them as agent.Turn.Prior instead.
package upstream
