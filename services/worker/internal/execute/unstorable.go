package execute

import (
	"fmt"
	"time"

	"github.com/turnstile-run/turnstile/pkg/wire"
	"github.com/turnstile-run/turnstile/services/worker/internal/lease"
)

// A record whose data Postgres refuses (lease.IsUnstorable: a NUL in its input, say, from a
// producer other than intake) fails its claim the same way every time. Rather than retrying that
// claim for ever — the turn stuck queued, the partition's offset held below it — the executor
// claims the record's lease.Storable form, which gives the turn a row and a lease, and counts each
// such claim as a failed attempt: the poison rule then fails the turn after MaxAttempts attempts,
// announces turn.failed and copies the intact record to the dead-letter topic.

// claimStorable claims req's storable form after the claim of req failed with cause, a data
// error. It reports false when even that claim was refused for its data (the turn's IDs
// themselves cannot be stored): the record is then dead-lettered as it is and the caller commits
// it, there being no row the turn could ever have.
func (t *turn) claimStorable(req lease.ClaimRequest, cause error) (lease.Claim, bool, error) {
	t.log.WarnContext(t.ctx, "the turn's record cannot be stored; claiming it without its input and metadata", "err", cause)
	claim, err := t.claim(lease.Storable(req))
	if err != nil && lease.IsUnstorable(err) {
		t.log.ErrorContext(t.ctx, "unstorable turn record sent to dead-letter topic", "partition", t.rec.Partition, "offset", t.rec.Offset, "err", err)
		t.x.deadLetter(t.ctx, t.rec, "unstorable", err.Error(), 0)
		return lease.Claim{}, false, nil
	}
	return claim, true, err
}

// refused is the attempt of a turn whose record could not be stored (cause), held under the lease
// of its storable form: it never runs the agent. An attempt before the last retries, recording
// the error; the last fails the turn and dead-letters its record.
func (a *attempt) refused(cause error) attemptResult {
	a.started = time.Now()
	err := fmt.Errorf("the turn's record cannot be stored: %w", cause)
	if a.number < int(a.x.maxAttempts.Load()) {
		return a.retry(err)
	}
	return a.unstorable(err)
}

// unstorable fails, for good, a turn whose record could not be stored, and dead-letters the
// record as it came.
func (a *attempt) unstorable(err error) attemptResult {
	a.log.ErrorContext(a.ctx, "turn failed", "attempt", a.number, "err", err)
	if !a.finish(wire.StatusFailed, err.Error(), "unstorable") {
		return attemptLost
	}
	a.ended("failed")
	return attemptFinished
}
