package execute

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/turnstile-run/turnstile/pkg/wire"
	"github.com/turnstile-run/turnstile/services/worker/internal/lease"
)

// A record whose data Postgres refuses (lease.IsUnstorable: a NUL in its input, say, from a
// producer other than intake) fails its claim the same way every time. Rather than retrying that
// claim for ever — the turn stuck queued, the partition's offset held below it — the executor
// claims the record's lease.Storable form, which gives the turn a row and a lease, and counts each
// such claim as a failed attempt: the poison rule then fails the turn after MaxAttempts attempts,
// announces turn.failed and copies the intact record to the dead-letter topic.

// claimUnstorable claims req's storable form after the claim of req failed with cause, a data
// error. It reports false when even that claim was refused for its data (the turn's IDs
// themselves cannot be stored): the record is then dead-lettered as it is and the caller commits
// it, there being no row the turn could ever have.
func (x *Executor) claimUnstorable(ctx context.Context, rec *kgo.Record, req lease.ClaimRequest, cause error) (lease.Claim, bool, error) {
	x.log.WarnContext(ctx, "the turn's record cannot be stored; claiming it without its input and metadata", "err", cause)
	claim, err := x.cfg.Claim(ctx, lease.Storable(req))
	if err != nil && lease.IsUnstorable(err) {
		x.log.ErrorContext(ctx, "unstorable turn record sent to dead-letter topic", "partition", rec.Partition, "offset", rec.Offset, "err", err)
		x.deadLetter(ctx, rec, "unstorable", err.Error(), 0)
		return lease.Claim{}, false, nil
	}
	return claim, true, err
}

// unstorableAttempt is the failed attempt of a turn whose record could not be stored, held under
// claim: the last one allowed fails the turn and dead-letters its record; any earlier one records
// the error and releases the lease for the next.
func (x *Executor) unstorableAttempt(ctx context.Context, rec *kgo.Record, env wire.Envelope, claim lease.Claim, cause error) attemptResult {
	msg := "the turn's record cannot be stored: " + cause.Error()
	ended := func(outcome string) {
		if x.hooks.AttemptEnded != nil {
			x.hooks.AttemptEnded(outcome, claim.Attempt, 0)
		}
	}
	if claim.Attempt >= x.cfg.MaxAttempts {
		x.log.ErrorContext(ctx, "turn failed", "attempt", claim.Attempt, "err", cause)
		sink := &attemptSink{
			pub: x.cfg.Publish, retried: x.hooks.PublishRetried, sessionID: env.SessionID, turnID: env.TurnID.String(),
			attempt: claim.Attempt, token: claim.Token, rec: rec, traceparent: header(rec, "traceparent"),
		}
		ev := wire.NewEvent(wire.EventFailed, wire.ErrorData{EventBase: wire.EventBase{TurnID: env.TurnID.String(), Attempt: claim.Attempt}, Error: msg})
		if x.finish(ctx, env, claim, sink, wire.StatusFailed, ev, msg, "unstorable") {
			ended("failed")
			return attemptFinished
		}
		return attemptLost
	}
	x.log.WarnContext(ctx, "attempt failed; will retry", "attempt", claim.Attempt, "err", cause)
	_ = x.store.RecordError(ctx, env.TurnID, claim.Token, msg)
	if err := x.store.Release(ctx, env.TurnID, claim.Token, false); err != nil && !errors.Is(err, lease.ErrFenced) {
		x.log.WarnContext(ctx, "release after failed attempt failed; the lease will expire instead", "err", err)
	}
	ended("retried")
	return attemptRetry
}
