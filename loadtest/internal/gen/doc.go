// Package gen is the load generator: it posts turns to intake at open-loop Poisson arrival times,
// follows every session's event stream from the gateway, and checks what it sees against what the
// deterministic demo agent must produce and against Postgres.
//
// Decisions:
//   - Arrivals are open loop: each turn is posted at its scheduled time in its own goroutine, whatever
//     the server is doing, so a slow server shows up as latency and backlog instead of slowing the
//     generator down (the coordinated-omission trap of closed-loop generators).
//   - Sessions come from a rolling window: a session receives TurnsPerSession turns spaced about
//     Window arrivals apart, so there is per-session order to check without making session-blocked
//     waits (which more workers cannot help) the bottleneck.
//   - Turn IDs are client-minted, so a turn whose 202 was lost to a timeout can still be recognised.
//   - Correctness is judged twice: from the streams (every accepted turn reaches exactly one terminal
//     event, its deltas are the predicted ones in order, exactly once, and a session's turns never
//     overlap) and from Postgres (every accepted turn succeeded with the predicted output, its user
//     and assistant messages are in the history exactly once, the history and the stream agree
//     on the order of a session's turns, which keeps the order of posts that did not overlap, as
//     the Kafka offsets do).
package gen
