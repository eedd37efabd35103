// Package deliver sends one claimed notification to its webhook and decides what becomes of it:
// delivered, retried later (exponential backoff with full jitter, Retry-After honoured), deferred
// without an attempt (its destination is at its concurrency limit or its circuit is open), or
// dead-lettered with the last error once attempts or age run out or the destination is refused.
//
// Each destination (scheme://host:port) has its own concurrency limit and circuit breaker
// (sony/gobreaker), so a receiver that hangs or answers 5xx holds at most its own few slots and
// then no slot at all: every other receiver's deliveries go on at their own pace.
//
// Every POST is signed in the Standard Webhooks scheme with the scheme's own library: webhook-id
// is the outbox row's ID, the same on every retry, so receivers can drop duplicates.
package deliver
