// Package notifier is the notifier role (issue 23): it delivers the push notifications the turns'
// transactional outbox holds (migration 00140, internal/outbox) to the webhooks clients registered,
// at least once, per turn in order, signed in the Standard Webhooks scheme, through an
// SSRF-checked client (internal/safehttp), with each destination's concurrency and circuit of its
// own (internal/deliver). A native webhook's notification is the turn's status; an A2A task's
// push config's (migration 00150) is the A2A Task, rendered from the row's snapshot of the task's
// turns by pkg/a2atask (as tasks/get renders it) and sent with the config's token and
// Authorization. A task's rows are filed under its first turn, so they too go in order.
//
// Any number of notifiers may run: each claims due rows with a lease and a fencing token, so a
// SIGKILLed notifier's rows are taken over when their leases lapse, and one whose lease lapsed
// cannot settle a row another claimed since. The notifier needs only Postgres.
package notifier
