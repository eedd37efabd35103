package execute

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/turnstile-run/turnstile/pkg/streams"
	"github.com/turnstile-run/turnstile/pkg/telemetry"
	"github.com/turnstile-run/turnstile/pkg/turnstore"
	"github.com/turnstile-run/turnstile/pkg/wire"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent"
	"github.com/turnstile-run/turnstile/services/worker/internal/consume"
	"github.com/turnstile-run/turnstile/services/worker/internal/lease"
)

// attempt is one attempt at a turn under one fencing token, with the sink that publishes its
// events under that token (made by turn.attempt, the only place either is made). A claim that
// acquired the turn's lease makes an attempt that runs (run); a statement that ended the turn
// without running it (expired before its claim, cancelled or out of attempts, or found finished)
// makes one that only publishes the end under the token that statement returned.
//
// run reads straight down: work runs the steps and stops at the first that fails, verdict names
// the outcome from where and why they stopped, and run calls that outcome's method. Outcomes
// (succeeded, expired, cancelled, overran, unavailable, failed, lost, handOff, retry, stalled, and unstorable
// for a record only its storable form could claim, chosen by refused) return the
// attempt's result and never call one another; what they share (finish, announce, deadLetter,
// ended) are actions that return no result.
type attempt struct {
	// turn is shared by the turn's attempts, which do not change it.
	*turn
	// number is the attempt's number, counted by the turn's row (wire.EventBase.Attempt).
	number int
	// token is the fencing token every write of the attempt carries: the statements that end the
	// turn, and every event the sink publishes.
	token wire.FenceToken
	sink  attemptSink
	// attemptCtx is a running attempt's context, a child of the turn's: the renewer cancels it with
	// lease.ErrLeaseLost or lease.ErrCancelRequested, and it ends with the turn's.
	attemptCtx context.Context
	// started is when the attempt began to run.
	started time.Time
}

// attemptResult is what runAttempt does after an attempt.
type attemptResult int

const (
	attemptFinished  attemptResult = iota // the turn is terminal: commit the record
	attemptHandedOff                      // the worker is draining and the turn was released
	attemptRetry                          // claim the turn again after a back-off
	attemptLost                           // another attempt holds the turn: claim again at once
)

// step is how far an attempt's work got.
type step int

const (
	stepRead     step = iota // reading the session's history and the earlier attempts' events
	stepAgent                // running the agent (and publishing what it and the attempt held)
	stepComplete             // committing the completion
	stepDone                 // the completion committed
)

// verdict is an attempt's outcome as its work left it.
type verdict int

const (
	verdictSucceeded   verdict = iota // the completion committed
	verdictFenced                     // the completion was fenced: another attempt holds the turn
	verdictLeaseLost                  // a publish was fenced, or the renewer found the lease gone
	verdictCancelled                  // the turn's cancel was requested while it ran
	verdictDrained                    // the worker's drain grace period is over
	verdictStalled                    // Redis did not take the attempt's turn.started
	verdictOverran                    // the agent ran past the turn's deadline
	verdictUnavailable                // the agent's upstream stayed unavailable as long as the deadline allowed
	verdictFailed                     // the last attempt failed, or the error is permanent
	verdictRetry                      // the attempt failed and another may do better
)

// run runs the attempt, whose claim was sent at acquiredAt and read the session history's sequence
// number sessionSeq, to its outcome.
func (a *attempt) run(sessionSeq int64, acquiredAt time.Time) attemptResult {
	a.started = time.Now()
	if remaining := time.Until(a.env.Deadline); remaining < a.x.cfg.MinUsefulTime {
		return a.expired(a.x.belowMinUseful(a.env.Deadline, remaining))
	}
	// Deferred before cancel, so it runs after it: a lingering publish of held events (hold) runs
	// with the turn's context, and the attempt waits for it rather than leave it running.
	defer a.sink.discard()
	attemptCtx, cancel := context.WithCancelCause(a.ctx)
	defer cancel(nil)
	a.attemptCtx = attemptCtx
	a.sink.waits, a.sink.cancel = &a.x.waits, cancel
	a.x.renewer.Track(a.env.TurnID, a.token, acquiredAt, cancel)
	defer a.x.renewer.Untrack(a.env.TurnID)
	a.begin()

	st, output, err := a.work(sessionSeq)
	switch a.verdict(st, err) {
	case verdictSucceeded:
		return a.succeeded(output)
	case verdictFenced:
		return a.lost("completion fenced: another attempt took over")
	case verdictLeaseLost:
		return a.lost("attempt lost its lease")
	case verdictCancelled:
		return a.cancelled()
	case verdictDrained:
		return a.handOff()
	case verdictStalled:
		return a.stalled()
	case verdictOverran:
		return a.overran()
	case verdictUnavailable:
		return a.unavailable(err)
	case verdictFailed:
		return a.failed(err)
	default:
		return a.retry(err)
	}
}

// begin holds the attempt's opening events — turn.retrying after a takeover, then turn.started —
// to go out with the agent's first events, or as the agent returns if it finishes within heldLinger
// (see hold and release). A refusal of them ends the attempt where the agent's event was refused,
// or before the completion.
func (a *attempt) begin() {
	base := a.sink.base()
	if a.number > 1 {
		a.counted()
		a.sink.hold(a.ctx, wire.NewEvent(wire.EventRetrying, wire.RetryingData{EventBase: base, PreviousAttempt: a.number - 1}))
	}
	a.sink.hold(a.ctx, wire.NewEvent(wire.EventStarted, wire.StartedData{EventBase: base, SessionID: a.env.SessionID}))
	// LogAttrs on the two lines every turn logs: an int or a duration passed as a key-value pair
	// is put in an interface, an allocation even with the level off.
	a.log.LogAttrs(a.ctx, slog.LevelInfo, "turn started", slog.Int("attempt", a.number))
}

// counted tells Hooks of an attempt after the first: a takeover of a lease that expired under
// another attempt, or a retry (a lease released, or this path's own lease expired).
func (a *attempt) counted() {
	acq := &a.acq
	switch {
	case acq.expiredOwner != "" && !acq.ownLease:
		a.log.InfoContext(a.ctx, "turn taken over from an expired lease", "attempt", a.number, "previous_owner", acq.expiredOwner)
		if a.x.hooks.Takeover != nil {
			a.x.hooks.Takeover()
		}
	case a.x.hooks.Retry == nil:
	case acq.ownLease:
		a.x.hooks.Retry(RetryOwnLease)
	default:
		a.x.hooks.Retry(RetryReleased)
	}
}

// work runs the attempt's steps — the session's history, the earlier attempts' events, the agent,
// the completion — and stops at the first that fails. It returns how far it got, the agent's
// output and the error that stopped it.
func (a *attempt) work(sessionSeq int64) (step, wire.Output, error) {
	history, err := a.x.cfg.History.GetAt(a.attemptCtx, a.session, sessionSeq)
	if err != nil {
		return stepRead, wire.Output{}, err
	}
	var prior []agent.PriorEvent
	if a.number > 1 && a.x.cfg.Prior != nil {
		if prior, err = a.x.cfg.Prior.Prior(a.attemptCtx, a.session, a.id, a.env.AcceptedAt, a.number); err != nil {
			return stepRead, wire.Output{}, err
		}
	}
	res, err := a.runAgent(history, prior)
	if err == nil {
		// What is still held (turn.started, and the deltas of an agent that finished within
		// heldLinger) goes out now, beside the completion's commit; turn.completed follows both.
		err = a.sink.release()
	}
	if err != nil {
		return stepAgent, wire.Output{}, err
	}

	return a.complete(wire.Output{Text: res.Text, State: res.State, Usage: wireUsage(res.Usage)})
}

// wireUsage is an agent's token usage as the turn's output records it, nil for none.
func wireUsage(u *agent.Usage) *wire.Usage {
	if u == nil {
		return nil
	}
	return &wire.Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, TotalTokens: u.TotalTokens, Model: u.Model}
}

// complete commits the agent's output, and tells the history of the messages it appended. It is
// work's last step, in a function of its own so that its locals are not in work's frame, which a
// held turn keeps under the agent for the whole answer.
func (a *attempt) complete(output wire.Output) (step, wire.Output, error) {
	seq, err := a.x.cfg.Completions.Do(a.ctx, lease.Completion{TurnID: a.env.TurnID, Token: a.token, Output: output, End: a.sink.end(true)})
	if err != nil {
		return stepComplete, output, err
	}
	if seq > 0 && a.x.appended != nil {
		msgs := agent.TurnMessages(seq, a.env.TurnID.String(), a.env.Input.Text, output.Text)
		a.x.appended.Appended(a.session, seq, msgs[:]...)
	}
	if seq > 0 && output.Usage != nil && a.x.cfg.Hooks.Succeeded != nil {
		a.x.cfg.Hooks.Succeeded(a.env.Tenant, *output.Usage)
	}
	return stepDone, output, nil
}

// runAgent runs the agent under the turn's deadline, a panic of it returned as an error.
func (a *attempt) runAgent(history []agent.Message, prior []agent.PriorEvent) (res agent.Result, err error) {
	ctx, cancelDeadline := context.WithDeadline(a.attemptCtx, a.env.Deadline)
	defer cancelDeadline()
	ctx, span := telemetry.StartChild(ctx, "worker.agent")
	defer func() { telemetry.End(span, err) }()
	defer func() {
		if v := recover(); v != nil {
			err = panicError{v}
		}
	}()
	return a.x.agent.Run(ctx, *a.agentTurn(prior), history, &a.sink)
}

// agentTurn is the turn as the agent sees it, made apart from runAgent so that runAgent's frame,
// which a held turn keeps under the agent, holds no copy of it.
//
//go:noinline
func (a *attempt) agentTurn(prior []agent.PriorEvent) *agent.Turn {
	return &agent.Turn{
		TurnID: a.env.TurnID.String(), SessionID: a.env.SessionID, Tenant: a.env.Tenant, Attempt: a.number,
		Text: a.env.Input.Text, Metadata: a.env.Metadata, Deadline: a.env.Deadline, Prior: prior,
	}
}

// verdict names the attempt's outcome from how far its work got (st) and the error that stopped
// it. It decides and does nothing: run acts on what it returns.
func (a *attempt) verdict(st step, err error) verdict {
	switch {
	case st == stepDone:
		return verdictSucceeded
	case st == stepComplete && errors.Is(err, turnstore.ErrFenced):
		return verdictFenced
	case st == stepAgent && a.sink.heldFailure() != nil:
		// The agent's events were refused because the attempt's turn.started was: the attempt
		// was interrupted, or Redis would not take it.
		if v, ok := a.interruption(err); ok {
			return v
		}
		return verdictStalled
	case a.attemptCtx.Err() != nil || errors.Is(err, streams.ErrStaleToken):
		if v, ok := a.interruption(err); ok {
			return v
		}
	}
	switch {
	case errors.Is(err, agent.ErrUnavailable):
		return verdictUnavailable
	case errors.Is(err, context.DeadlineExceeded) && time.Now().After(a.env.Deadline):
		return verdictOverran
	case a.number >= int(a.x.maxAttempts.Load()) || errors.Is(err, agent.ErrPermanent):
		return verdictFailed
	}
	return verdictRetry
}

// interruption names what interrupted the attempt, if anything did: a lost lease (a fenced publish,
// or the renewer), a cancel request, or the end of the drain grace period.
func (a *attempt) interruption(err error) (verdict, bool) {
	cause := context.Cause(a.attemptCtx)
	switch {
	case errors.Is(err, streams.ErrStaleToken), errors.Is(cause, lease.ErrLeaseLost):
		return verdictLeaseLost, true
	case errors.Is(cause, lease.ErrCancelRequested):
		return verdictCancelled, true
	case errors.Is(cause, consume.ErrDraining) || a.ctx.Err() != nil:
		return verdictDrained, true
	}
	return 0, false
}

// succeeded publishes turn.completed behind the agent's events, the completion committed.
func (a *attempt) succeeded(output wire.Output) attemptResult {
	// The row is terminal now; the completed event follows, once the events held when the agent
	// returned were accepted (with what of them Redis did not take). Should this process die in
	// between, the redelivered record finds DONE and republishes the terminal event (at most once
	// per turn); deltas not yet published are then lost with the process, as they are when it dies
	// before the linger ran out. The publish keeps trying through a Redis outage of up to
	// terminalPatience; should Redis stay unreachable longer, the turn stays succeeded (its output
	// is in Postgres, GET /v1/turns/{id}) and the stream lacks the group. A slow agent's events are
	// refused, and its attempt retried, before the completion.
	if err := a.sink.publishTerminal(a.ctx, wire.NewEvent(wire.EventCompleted, wire.CompletedData{EventBase: a.sink.base(), Output: output})); err != nil {
		a.log.ErrorContext(a.ctx, "publish turn.completed failed after completion", "err", err)
	}
	a.log.LogAttrs(a.ctx, slog.LevelInfo, "turn succeeded", slog.Int("attempt", a.number), slog.Duration("took", time.Since(a.started).Round(time.Millisecond)))
	a.ended("succeeded")
	return attemptFinished
}

// expired ends a claimed turn whose deadline leaves less than the minimum useful time (msg says
// by how much).
func (a *attempt) expired(msg string) attemptResult {
	if !a.finish(wire.StatusExpired, msg, "") {
		return attemptLost
	}
	a.ended("expired")
	return attemptFinished
}

// cancelled ends a turn whose cancel was requested while the attempt ran.
func (a *attempt) cancelled() attemptResult {
	if !a.finish(wire.StatusCancelled, "cancelled", "") {
		return attemptLost
	}
	a.ended("cancelled")
	return attemptFinished
}

// overran fails a turn whose agent ran past its deadline, without a retry or a dead letter.
func (a *attempt) overran() attemptResult {
	if !a.finish(wire.StatusFailed, "deadline exceeded", "") {
		return attemptLost
	}
	a.ended("failed")
	return attemptFinished
}

// unavailable fails a turn whose agent's upstream could not be reached for as long as its deadline
// let the agent wait (err names the wait: its tries and how long it lasted), without a retry or a
// dead letter: the record is not poison, and a replay after the deadline could not help.
func (a *attempt) unavailable(err error) attemptResult {
	a.log.WarnContext(a.ctx, "turn failed: its upstream stayed unavailable", "attempt", a.number, "err", err)
	if !a.finish(wire.StatusFailed, err.Error(), "") {
		return attemptLost
	}
	a.ended("failed")
	return attemptFinished
}

// failed fails a turn for good (its last attempt failed, or err is permanent) and dead-letters it.
func (a *attempt) failed(err error) attemptResult {
	a.log.ErrorContext(a.ctx, "turn failed", "attempt", a.number, "err", err)
	if !a.finish(wire.StatusFailed, err.Error(), "failed") {
		return attemptLost
	}
	a.ended("failed")
	return attemptFinished
}

// lost ends an attempt whose lease another attempt holds; msg says how that showed.
func (a *attempt) lost(msg string) attemptResult {
	a.log.WarnContext(a.ctx, msg, "attempt", a.number)
	a.ended("lease_lost")
	return attemptLost
}

// handOff releases the turn of a draining worker, so that another worker takes it over at once.
// The attempt began: its turn.started goes out first.
func (a *attempt) handOff() attemptResult {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(a.ctx), 5*time.Second)
	defer cancel()
	if err := a.sink.flushHeld(ctx); err != nil && !errors.Is(err, streams.ErrStaleToken) {
		a.log.WarnContext(a.ctx, "publish of turn.started failed on hand-off", "err", err)
	}
	if err := a.x.turns.EndAttempt(ctx, a.env.TurnID, a.token, true, "handed_off", "", a.sink.end(false)); err != nil && !errors.Is(err, turnstore.ErrFenced) {
		a.log.WarnContext(a.ctx, "release on drain failed; the lease will expire instead", "err", err)
	}
	a.log.InfoContext(a.ctx, "turn handed off on drain", "attempt", a.number)
	a.ended("handed_off")
	return attemptHandedOff
}

// retry records err on the turn and its attempt and releases it for the next attempt, in one
// statement. The attempt began: its turn.started goes out before the next attempt's turn.retrying.
func (a *attempt) retry(err error) attemptResult {
	a.log.WarnContext(a.ctx, "attempt failed; will retry", "attempt", a.number, "err", err)
	if err := a.sink.flushHeld(a.ctx); err != nil && !errors.Is(err, streams.ErrStaleToken) {
		a.log.WarnContext(a.ctx, "publish of turn.started failed", "err", err)
	}
	if err := a.x.turns.EndAttempt(a.ctx, a.env.TurnID, a.token, false, "retried", err.Error(), a.sink.end(false)); err != nil && !errors.Is(err, turnstore.ErrFenced) {
		a.log.WarnContext(a.ctx, "release after failed attempt failed; the lease will expire instead", "err", err)
	}
	a.ended("retried")
	return attemptRetry
}

// stalled ends an attempt whose turn.started Redis would not take: no later event of it may be
// shown without it. The lease is kept, not released, so the claim after the back-off finds the
// turn LEASED until the lease expires and then takes it over as the next attempt.
func (a *attempt) stalled() attemptResult { return attemptRetry }

// finish ends the turn with status (failed, cancelled or expired) and msg under the attempt's
// token, publishes its terminal event and, when deadLetter names a reason, copies the record to
// the dead-letter topic. It reports false when the attempt was fenced or the statement failed:
// then nothing changed.
func (a *attempt) finish(status wire.Status, msg, deadLetter string) bool {
	if err := a.x.turns.FinishTurn(a.ctx, a.env.TurnID, a.token, status, msg, deadLetter, a.sink.end(true)); err != nil {
		if !errors.Is(err, turnstore.ErrFenced) {
			a.log.ErrorContext(a.ctx, "finish turn failed", "status", status, "err", err)
		}
		return false
	}
	a.announce(terminal(status, a.sink.base(), msg))
	a.log.InfoContext(a.ctx, "turn ended", "status", status, "attempt", a.number)
	if deadLetter != "" {
		a.deadLetter(deadLetter, msg)
	}
	return true
}

// announce publishes the turn's terminal event ev, the turn's row being terminal.
func (a *attempt) announce(ev wire.Event) {
	if err := a.sink.publishTerminal(a.ctx, ev); err != nil {
		a.log.ErrorContext(a.ctx, "publish terminal event failed", "event", ev.Type, "err", err)
	}
}

// ended tells Hooks.AttemptEnded of the attempt's outcome.
func (a *attempt) ended(outcome string) {
	if a.x.hooks.AttemptEnded != nil {
		a.x.hooks.AttemptEnded(outcome, a.number, time.Since(a.started))
	}
}

// panicError carries a recovered agent panic.
type panicError struct{ v any }

func (p panicError) Error() string { return fmt.Sprintf("agent panicked: %v", p.v) }
