// Package execute runs one turn record to its end: decode, claim, deadline check, the agent attempt
// under a renewed lease, fenced publishing of every event, and the fenced completion — with retries
// up to the attempt limit, dead-lettering of poison, cancellation, and handing the turn off on drain.
//
// Handle returns only when the record may be committed (the turn is terminal, here or elsewhere) or
// when the worker is draining (the turn was handed off and must not be committed). While another
// worker holds a live lease on the turn, Handle waits for it: the turn's session stays blocked, which
// is what keeps a session's turns in order across rebalances and crashes.
package execute
