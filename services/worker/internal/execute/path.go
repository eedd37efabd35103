package execute

import (
	"fmt"
	"time"

	"github.com/turnstile-run/turnstile/pkg/turnstore"
	"github.com/turnstile-run/turnstile/pkg/wire"
	"github.com/turnstile-run/turnstile/services/worker/internal/consume"
	"github.com/turnstile-run/turnstile/services/worker/internal/lease"
)

// handler takes a turn on from one stage of the turn path and says what becomes of its record.
type handler func(t *turn) consume.Result

// stage is one step of the turn path: it does its part and hands the turn to next, or ends the
// turn's way there by returning what becomes of its record.
type stage func(next handler) handler

// again is what a pass through the stages after repeat returns when the turn goes on: the claim
// waited for a turn another worker holds or for Postgres, or an attempt ended and another may do
// better. repeat runs the pass again, so it never reaches the consumer.
const again consume.Result = -1

// stages is the turn path, outermost first; runAttempt ends it. This is the one place the path is
// assembled: a new concern (routing a turn to an agent, a tenant's share, a budget check) is one
// stage added here.
func (x *Executor) stages() []stage {
	return []stage{
		x.decode,      // the record's envelope; an undecodable record is dead-lettered
		x.repeat,      // the stages below run again while a pass ends with the turn going on
		x.expireEarly, // a turn that can no longer be useful is recorded expired, never claimed
		x.claimLease,  // the turn's lease and fencing token, or what stands in its way
	}
}

// chain returns the handler that runs stages in order, the first outermost, and then last.
func chain(last handler, stages ...stage) handler {
	h := last
	for i := len(stages) - 1; i >= 0; i-- {
		h = stages[i](h)
	}
	return h
}

// decode opens the record's turn: its envelope, log context and span, which ends when the turn's
// way through the path does. An undecodable record is dead-lettered and committed.
func (x *Executor) decode(next handler) handler {
	return func(t *turn) consume.Result {
		if !t.open() {
			return consume.Commit
		}
		defer t.span.End()
		return next(t)
	}
}

// repeat runs the stages after it until a pass ends with what becomes of the record (not again).
func (x *Executor) repeat(next handler) handler {
	return func(t *turn) consume.Result {
		for {
			if res := next(t); res != again {
				return res
			}
		}
	}
}

// expireEarly ends, without a claim, a turn whose deadline leaves less than the minimum useful time
// (invariant 7): it never starts. When the turn was not expired here (another worker holds it, it
// ended, or the statement failed), the claim that follows sorts that out.
func (x *Executor) expireEarly(next handler) handler {
	return func(t *turn) consume.Result {
		if time.Until(t.env.Deadline) < x.cfg.MinUsefulTime && t.expireUnclaimed() {
			return consume.Commit
		}
		return next(t)
	}
}

// claimLease claims the turn and hands it on when the claim acquired its lease (t.acq). Otherwise
// it ends the turn's way as the claim's outcome says: the turn ended (Done), waits for an earlier
// turn of its session (Blocked: the record is deferred), was cancelled or ran out of attempts, or,
// after a pause, goes on (again) while another worker holds it or the claim failed.
func (x *Executor) claimLease(next handler) handler {
	return func(t *turn) consume.Result {
		if res, ok := t.claimLease(); !ok {
			return res
		}
		return next(t)
	}
}

// claimLease sends the turn's claim and does what its outcome needs. It reports true, with t.acq
// set, when the claim acquired the turn's lease, and otherwise what becomes of the record. It is
// apart from the stage so that its frame is gone while the attempt runs: the attempt's goroutine
// waits for a model's next token under the stages' frames for the whole answer, and the runtime
// keeps a goroutine's stack at least four times what it uses while it waits.
func (t *turn) claimLease() (consume.Result, bool) {
	x, ctx := t.x, t.ctx
	acquiredAt := time.Now()
	req := t.claimRequest()
	claim, err := t.claim(req)
	var unstorable error
	if err != nil && lease.IsUnstorable(err) {
		unstorable = err
		var ok bool
		if claim, ok, err = t.claimStorable(req, unstorable); !ok {
			return consume.Commit, false
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return consume.HandOff, false
		}
		x.log.WarnContext(ctx, "claim failed; retrying", "err", err)
		if !x.sleep(ctx, x.cfg.LeasedPoll) {
			return consume.HandOff, false
		}
		return again, false
	}
	switch claim.Outcome {
	case turnstore.ClaimDone:
		if t.outrun {
			t.endOutrun()
			return consume.Commit, false
		}
		t.republishTerminal()
		return consume.Commit, false
	case turnstore.ClaimLeased:
		// Another live worker runs this turn (a rebalance moved the partition, or our own earlier
		// attempt was fenced). Wait for it: running it here would run it twice, and starting the
		// session's next turn would break its order.
		wait := min(time.Until(claim.LeaseExpiresAt)+10*time.Millisecond, x.cfg.LeasedPoll)
		if !x.sleep(ctx, max(wait, 10*time.Millisecond)) {
			return consume.HandOff, false
		}
		return again, false
	case turnstore.ClaimBlocked:
		// An earlier accepted turn of the session is not terminal (its record was lost and is
		// re-driven behind this one, say): not an attempt, not a failure. The consumer holds
		// the record and hands it back when a turn of the session ends.
		t.log.DebugContext(ctx, "turn waits for an earlier turn of its session")
		if x.hooks.Blocked != nil {
			x.hooks.Blocked()
		}
		return consume.Defer, false
	case turnstore.ClaimPaused:
		// An operator paused the turn's tenant or agent: the record is held like a blocked one
		// and claimed again after the consumer's deferral pause, until the queue is resumed.
		t.log.DebugContext(ctx, "turn waits: its queue is paused")
		if x.hooks.Paused != nil {
			x.hooks.Paused()
		}
		return consume.Defer, false
	case turnstore.ClaimCancelled:
		t.finishUnleased(wire.StatusCancelled, "cancelled before it started", "")
		return consume.Commit, false
	case turnstore.ClaimExhausted:
		msg := fmt.Sprintf("attempt %d ended without finishing and no attempts remain", claim.Attempt)
		t.finishUnleased(wire.StatusFailed, msg, "attempts_exhausted")
		return consume.Commit, false
	case turnstore.ClaimAcquired:
		// t.acq still holds this path's earlier attempt, if any: a lease that expired under its
		// token was this path's own.
		own := claim.ExpiredOwner != "" && t.acq.token != 0 && claim.ExpiredToken == t.acq.token
		t.acq = acquired{
			attempt: claim.Attempt, token: claim.Token, sessionSeq: claim.SessionSeq, acquiredAt: acquiredAt, unstorable: unstorable,
			expiredOwner: claim.ExpiredOwner, ownLease: own,
		}
		return 0, true
	}
	return again, false
}

// runAttempt ends the turn path: it runs the attempt the claim's lease makes and says what becomes
// of the record — committed once the turn is terminal, handed off on drain — or goes on (again)
// after a failed attempt's back-off, or at once when another attempt holds the turn.
func (x *Executor) runAttempt(t *turn) consume.Result {
	acq := &t.acq
	a := t.attempt(acq.attempt, acq.token)
	var r attemptResult
	if acq.unstorable != nil {
		r = a.refused(acq.unstorable)
	} else {
		r = a.run(acq.sessionSeq, acq.acquiredAt)
	}
	switch r {
	case attemptFinished:
		return consume.Commit
	case attemptHandedOff:
		return consume.HandOff
	case attemptRetry:
		if !x.sleep(t.ctx, backoff(x.cfg.RetryBackoff, acq.attempt)) {
			return consume.HandOff
		}
	case attemptLost:
		t.outrun = true
	}
	return again
}
