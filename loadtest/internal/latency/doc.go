// Package latency is the added-latency scenario: the time a user waits for a turn whose agent
// answers at once — POST → turn.started and POST → the first turn.delta at an SSE reader that was
// already waiting — at fractions of the capacity measured in the same run, beside the floor: one
// record produced, fetched, XADDed and read back by a blocking XREAD through the same broker and
// Redis at the same time. What the platform adds is the difference.
//
// Decisions:
//   - The load generator (package gen) posts and follows the streams, so the turns are checked as
//     every other scenario checks them; only turns posted after their session's stream answered
//     are timed (the generator's Waits).
//   - The floor runs through the whole of each load level, so it sees the same machine the turns
//     do; each probe is one record at a time through the pipeline, timed from before its produce.
//   - Each level is reported beside the stack's own means of the stages on the way (intake's
//     produce, the worker's claim, publish and completion batches, the gateway's delivery), read
//     from its /metrics before and after the level, so a rise of the added latency can be placed.
package latency
