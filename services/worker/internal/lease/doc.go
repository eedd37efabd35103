// Package lease is the worker's side of a turn's Postgres row: the claim that takes a lease with a
// fencing token, batched renewal, release on drain, and the fenced statements that end a turn.
//
// The fencing token comes from one global sequence, so it only grows. Every statement that changes a
// claimed turn names the token it holds; a statement with a stale token matches no row and returns
// ErrFenced, so a worker that paused past its lease ("zombie") changes nothing when it wakes.
//
// Completion and the session-history append are one statement (data-modifying CTEs run in one
// implicit transaction), so a turn is marked done and its messages appended together or not at all.
package lease
