// Package outbox is the notifier's view of the turn_notifications table (migration 00140): the
// rows the turns' triggers write in the transaction of every status change of a turn with a
// webhook. A notifier claims due rows with a lease and a fencing token, like a worker claims turns;
// settling a row (delivered, retry later, dead) needs the token of the claim, so a notifier whose
// lease ran out and was taken over cannot settle anything.
//
// Per task in order: only a turn's oldest open row (neither delivered nor dead) can be claimed, so
// a newer state of a turn is never sent before an older one was delivered or given up.
package outbox
