// Package execute runs one turn record to its end: decode, claim, deadline check, the agent attempt
// under a renewed lease, fenced publishing of every event, and the fenced completion — with retries
// up to the attempt limit, dead-lettering of poison, cancellation, and handing the turn off on drain.
//
// Deadlines are checked before any claim: a turn whose remaining time is below the minimum useful
// time is recorded expired without ever being attempted (no attempt, no start time, only
// turn.expired). Once started, the agent's context carries the deadline, and a turn that overruns it
// fails with "deadline exceeded" without a retry.
//
// Handle returns only when the record may be committed (the turn is terminal, here or elsewhere) or
// when the worker is draining (the turn was handed off and must not be committed). While another
// worker holds a live lease on the turn, Handle waits for it: the turn's session stays blocked, which
// is what keeps a session's turns in order across rebalances and crashes.
package execute
