package execute

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/turnstile-run/turnstile/pkg/streams"
	"github.com/turnstile-run/turnstile/pkg/turnstore"
	"github.com/turnstile-run/turnstile/pkg/wire"
	"github.com/turnstile-run/turnstile/services/worker/internal/lease"
)

// The outcomes of a turn that ends without an attempt running: one statement ends it (or finds it
// ended) and returns the attempt number and fencing token its terminal event is published under.

// expireUnclaimed ends a turn whose deadline leaves less than the minimum useful time, before any
// claim. It reports false when the turn was not expired here (held by a live worker, finished,
// cancelled, or the statement failed): the claim that follows sorts those out.
func (t *turn) expireUnclaimed() bool {
	remaining := time.Until(t.env.Deadline)
	msg := t.x.belowMinUseful(t.env.Deadline, remaining)
	token, number, err := t.x.store.Expire(t.ctx, lease.ClaimRequest{Env: t.env, Partition: t.rec.Partition, Offset: t.rec.Offset}, msg)
	if err != nil {
		if !errors.Is(err, turnstore.ErrFenced) {
			t.log.WarnContext(t.ctx, "expire turn failed", "err", err)
		}
		return false
	}
	a := t.attempt(number, token)
	a.announce(terminal(wire.StatusExpired, a.sink.base(), msg))
	t.log.InfoContext(t.ctx, "turn expired before it started", "remaining", remaining.Round(time.Millisecond))
	if t.x.hooks.AttemptEnded != nil {
		t.x.hooks.AttemptEnded("expired", number, 0)
	}
	return true
}

// finishUnleased ends a turn the claim could not lease — cancelled before it started, or out of
// attempts — with status and msg, and dead-letters it when deadLetter names a reason.
func (t *turn) finishUnleased(status wire.Status, msg, deadLetter string) {
	token, number, err := t.x.turns.FinishUnleased(t.ctx, t.env.TurnID, status, msg, deadLetter)
	if err != nil {
		if !errors.Is(err, turnstore.ErrFenced) {
			t.log.ErrorContext(t.ctx, "finish unleased turn failed", "status", status, "err", err)
		}
		return
	}
	a := t.attempt(number, token)
	a.announce(terminal(status, a.sink.base(), msg))
	t.log.InfoContext(t.ctx, "turn ended", "status", status)
	if deadLetter != "" {
		a.deadLetter(deadLetter, msg)
	}
}

// republishTerminal makes sure a finished turn's terminal event is in its stream: the process that
// finished it may have died between the Postgres commit and the publish. The publish script keeps
// at most one terminal event per turn, so this is a no-op in the usual case.
//
// Only the turn's own record (the one its row names) republishes: that is the record redelivered
// when a process died before its publish, its offset uncommitted. Another record of the turn (a
// client re-posting its Idempotency-Key after intake's record of the key expired or went with
// Redis, a produce retried after a timeout) comes after the turn's own record was handled, so the
// terminal event was published then; and after a Redis loss the script's marker of it is gone, so
// publishing it again would repeat it.
func (t *turn) republishTerminal() {
	f, err := t.x.turns.ReadFinal(t.ctx, t.env.TurnID)
	if err != nil {
		t.log.WarnContext(t.ctx, "read finished turn failed", "err", err)
		return
	}
	a := t.attempt(f.Attempt, f.Token)
	if f.Offset >= 0 && (f.Partition != t.rec.Partition || f.Offset != t.rec.Offset) {
		t.log.InfoContext(t.ctx, "another record of a finished turn; its terminal event is not published again",
			"status", f.Status, "turn_partition", f.Partition, "turn_offset", f.Offset)
		if f.DeadLetter != "" {
			a.deadLetter(f.DeadLetter, f.Error)
		}
		return
	}
	var ev wire.Event
	if f.Status == wire.StatusSucceeded {
		ev = wire.NewEvent(wire.EventCompleted, wire.CompletedData{EventBase: a.sink.base(), Output: f.Output})
	} else {
		ev = terminal(f.Status, a.sink.base(), f.Error)
	}
	if err := a.sink.publishTerminal(t.ctx, ev); err != nil && !errors.Is(err, streams.ErrStaleToken) {
		t.log.WarnContext(t.ctx, "republish terminal event failed", "err", err)
	}
	if f.DeadLetter != "" {
		// The worker that failed the turn died before its dead letter was acknowledged.
		a.deadLetter(f.DeadLetter, f.Error)
	}
}

// endOutrun ends the way of a record whose attempt another attempt outran and finished. That
// attempt published the turn's terminal event; publishing it again from here would, after Redis lost
// its data (and the publish script's marker of it), put a second one in the session's new stream.
// A dead letter the finishing worker did not get acknowledged is still written.
func (t *turn) endOutrun() {
	f, err := t.x.turns.ReadFinal(t.ctx, t.env.TurnID)
	if err != nil {
		t.log.WarnContext(t.ctx, "read finished turn failed", "err", err)
		return
	}
	t.log.InfoContext(t.ctx, "another attempt finished the turn; its terminal event is not published again", "status", f.Status,
		"final_attempt", f.Attempt)
	if f.DeadLetter != "" {
		t.attempt(f.Attempt, f.Token).deadLetter(f.DeadLetter, f.Error)
	}
}

// deadLetter copies the failed turn's record to the dead-letter topic and then clears the turn's
// pending dead-letter mark; a crash in between leaves the mark, and the redelivered record writes
// the dead letter again (at least once).
func (a *attempt) deadLetter(reason, msg string) {
	if !a.x.deadLetter(a.ctx, a.rec, reason, msg, a.number) {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(a.ctx), 10*time.Second)
	defer cancel()
	if err := a.x.turns.ClearDeadLetter(cctx, a.env.TurnID); err != nil {
		a.log.WarnContext(a.ctx, "recording the dead letter failed; it may be written again", "err", err)
	}
}

// deadLetter writes rec to the dead-letter topic with why (reason, msg) and after how many
// attempts; it reports whether the write succeeded.
func (x *Executor) deadLetter(ctx context.Context, rec *kgo.Record, reason, msg string, attempts int) bool {
	if x.dlq == nil {
		return false
	}
	headers := append([]kgo.RecordHeader{}, rec.Headers...)
	headers = append(headers,
		kgo.RecordHeader{Key: "turnstile-dlq-reason", Value: []byte(reason)},
		kgo.RecordHeader{Key: "turnstile-error", Value: []byte(msg)},
		kgo.RecordHeader{Key: "turnstile-attempts", Value: []byte(strconv.Itoa(attempts))},
		kgo.RecordHeader{Key: "turnstile-source", Value: []byte(rec.Topic + "/" + strconv.Itoa(int(rec.Partition)) + "/" + strconv.FormatInt(rec.Offset, 10))},
	)
	out := &kgo.Record{Topic: x.cfg.DLQTopic, Key: rec.Key, Value: rec.Value, Headers: headers}
	// The dead-letter write must not be lost to a drain: it uses its own bounded context.
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := x.dlq.DeadLetter(pctx, out); err != nil {
		x.log.ErrorContext(ctx, "dead-letter produce failed", "reason", reason, "err", err)
		return false
	}
	// ctx carries the turn's ID and session (none for an undecodable record: its source says
	// where it was).
	x.log.WarnContext(ctx, "turn dead-lettered", "reason", reason, "error", msg, "attempt", attempts,
		"dlq_topic", x.cfg.DLQTopic, "source", rec.Topic+"/"+strconv.Itoa(int(rec.Partition))+"/"+strconv.FormatInt(rec.Offset, 10))
	if x.hooks.DeadLettered != nil {
		x.hooks.DeadLettered(reason)
	}
	return true
}
