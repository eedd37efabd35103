// Package notifier is the notifier role (issue 23): it delivers the push notifications the turns'
// transactional outbox holds (migration 00140, internal/outbox) to the webhooks clients registered,
// at least once, per turn in order, signed in the Standard Webhooks scheme, through an
// SSRF-checked client (internal/safehttp), with each destination's concurrency and circuit of its
// own (internal/deliver).
//
// Any number of notifiers may run: each claims due rows with a lease and a fencing token, so a
// SIGKILLed notifier's rows are taken over when their leases lapse, and one whose lease lapsed
// cannot settle a row another claimed since. The notifier needs only Postgres.
package notifier
