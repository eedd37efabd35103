package execute

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/turnstile-run/turnstile/pkg/logging"
	"github.com/turnstile-run/turnstile/pkg/streams"
	"github.com/turnstile-run/turnstile/pkg/telemetry"
	"github.com/turnstile-run/turnstile/pkg/wire"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent"
	"github.com/turnstile-run/turnstile/services/worker/internal/lease"
)

// Config tunes an Executor.
type Config struct {
	MaxAttempts   int
	MinUsefulTime time.Duration
	DLQTopic      string
	// RetryBackoff is the base pause before a failed attempt is retried; it doubles per attempt,
	// with jitter. Defaults to 200ms.
	RetryBackoff time.Duration
	// LeasedPoll is how often a turn held by another live worker is re-checked. Defaults to 250ms.
	LeasedPoll time.Duration
	// History, when set, reads a session's history (the worker passes its cache); otherwise the
	// lease store is queried on every attempt. lastSeq is the history's last sequence number as the
	// claim read it (lease.Claim.SessionSeq), so a cache can answer without a round trip.
	History func(ctx context.Context, sessionID string, lastSeq int64) ([]agent.Message, error)
	// Prior, when set, reads what earlier attempts of a turn published; attempts after the first
	// receive it as agent.Turn.Prior.
	Prior func(ctx context.Context, sessionID, turnID string, acceptedAt time.Time, attempt int) ([]agent.PriorEvent, error)
	// Claim, Complete and Publish, when set, replace the lease store's Claim and Complete and the
	// publisher's PublishMany: the worker passes its group-commit batchers (package batch), which send
	// the turns' requests together. Each must behave exactly like the call it replaces. Defaults to
	// one round trip per call.
	// Complete returns the session history's sequence number after the turn's messages, or 0 when
	// it does not know it.
	Claim    func(ctx context.Context, req lease.ClaimRequest) (lease.Claim, error)
	Complete func(ctx context.Context, c lease.Completion) (int64, error)
	// Publish publishes one turn's group of events in the order given, in one script call, and
	// returns one result per event.
	Publish func(ctx context.Context, ms []streams.Message) []streams.PublishResult
	// HistoryAppended, when set, learns of the two messages a completion appended to the session
	// history (the worker extends its history cache with them, so the session's next turn reads no
	// history from Postgres). lastSeq is the assistant message's sequence number.
	HistoryAppended func(sessionID string, lastSeq int64, msgs ...agent.Message)
}

// Producer is the part of a Kafka client the executor needs to dead-letter records.
type Producer interface {
	ProduceSync(ctx context.Context, rs ...*kgo.Record) kgo.ProduceResults
}

// Hooks observe outcomes (metrics, tests). Every field is optional; hooks must be fast and safe for
// concurrent use.
type Hooks struct {
	// AttemptEnded is called when an attempt ends with its outcome: succeeded, failed, retried,
	// cancelled, expired, lease_lost, handed_off.
	AttemptEnded func(outcome string, attempt int, took time.Duration)
	// DeadLettered is called after a record was written to the dead-letter topic.
	DeadLettered func(reason string)
	// Takeover is called when an attempt takes over a turn from an earlier one.
	Takeover func()
	// PublishRetried is called before each further try of a group of events Redis could not take
	// (unreachable, or an error of the call); terminal says the group ends the turn (see
	// terminalPatience).
	PublishRetried func(terminal bool)
}

// Executor runs turn records.
type Executor struct {
	cfg     Config
	store   *lease.Store
	agent   agent.Agent
	renewer *Renewer
	dlq     Producer
	log     *slog.Logger
	hooks   Hooks
	waits   waitSet
}

// New returns an executor.
func New(cfg Config, store *lease.Store, pub *streams.Publisher, ag agent.Agent, renewer *Renewer, dlq Producer, log *slog.Logger, hooks Hooks) *Executor {
	if cfg.RetryBackoff == 0 {
		cfg.RetryBackoff = 200 * time.Millisecond
	}
	if cfg.LeasedPoll == 0 {
		cfg.LeasedPoll = 250 * time.Millisecond
	}
	if cfg.Claim == nil {
		cfg.Claim = store.Claim
	}
	if cfg.Complete == nil {
		cfg.Complete = func(ctx context.Context, c lease.Completion) (int64, error) {
			r := store.CompleteMany(ctx, []lease.Completion{c})[0]
			return r.Val, r.Err
		}
	}
	if cfg.Publish == nil {
		cfg.Publish = pub.PublishMany
	}
	return &Executor{cfg: cfg, store: store, agent: ag, renewer: renewer, dlq: dlq, log: log, hooks: hooks}
}

// Result says whether the record may be committed.
type Result int

// Results of Handle.
const (
	// Finished: the turn is terminal (here or elsewhere); commit the record.
	Finished Result = iota
	// HandedOff: the worker is draining; the turn was released and the record must not be committed.
	HandedOff
)

// Handle runs the record's turn to its end. ctx is the worker's turn context: cancelled with
// ErrDraining when the drain grace period is over.
func (x *Executor) Handle(ctx context.Context, rec *kgo.Record) Result {
	env, rawMetadata, err := wire.DecodeEnvelopeRaw(rec.Value)
	if err != nil {
		x.log.Error("undecodable turn record sent to dead-letter topic", "partition", rec.Partition, "offset", rec.Offset, "err", err)
		x.deadLetter(ctx, rec, "undecodable", err.Error(), 0)
		return Finished
	}
	// From here on the session is its key (wire.SessionKey) in every store; the agent and the
	// events see the client's session ID. The key comes from the envelope, never the record's key,
	// so records written before sessions were keyed by tenant land in the same session.
	env.SessionID = env.SessionKey()
	// The turn ID's text as the client knows it (wire.Envelope.ShownTurnID), made once for the
	// turn: the log context, the span and every attempt's events share it. The stores and the
	// agent get env.TurnID, which is unique across tenants.
	turnID := env.ShownTurnID()
	ctx = logging.With(ctx, slog.String("turn_id", turnID), slog.String("session_id", wire.ClientSessionID(env.SessionID)), slog.String("tenant", env.Tenant))
	ctx, span := telemetry.Start(telemetry.ExtractRecord(ctx, rec), "worker.turn", trace.WithSpanKind(trace.SpanKindConsumer), telemetry.TurnAttributes(turnID, env.SessionID, 0))
	defer span.End()
	for {
		// A turn that cannot be useful any more never starts: it is recorded expired without a claim.
		if time.Until(env.Deadline) < x.cfg.MinUsefulTime && x.expire(ctx, rec, env) {
			return Finished
		}
		acquiredAt := time.Now()
		cctx, cspan := telemetry.StartChild(ctx, "worker.claim")
		claim, err := x.cfg.Claim(cctx, lease.ClaimRequest{Env: env, RawMetadata: rawMetadata, Partition: rec.Partition, Offset: rec.Offset})
		if cspan.IsRecording() {
			cspan.SetAttributes(attribute.String("turnstile.claim", string(claim.Outcome)), attribute.Int("turnstile.attempt", claim.Attempt))
		}
		telemetry.End(cspan, err)
		if err != nil {
			if ctx.Err() != nil {
				return HandedOff
			}
			x.log.WarnContext(ctx, "claim failed; retrying", "err", err)
			if !x.sleep(ctx, x.cfg.LeasedPoll) {
				return HandedOff
			}
			continue
		}
		switch claim.Outcome {
		case lease.Done:
			x.republishTerminal(ctx, rec, env)
			return Finished
		case lease.Leased:
			// Another live worker runs this turn (a rebalance moved the partition, or our own earlier
			// attempt was fenced). Wait for it: running it here would run it twice, and starting the
			// session's next turn would break its order.
			wait := min(time.Until(claim.LeaseExpiresAt)+10*time.Millisecond, x.cfg.LeasedPoll)
			if !x.sleep(ctx, max(wait, 10*time.Millisecond)) {
				return HandedOff
			}
			continue
		case lease.Cancelled:
			x.finishUnleased(ctx, rec, env, wire.StatusCancelled, "cancelled before it started", "")
			return Finished
		case lease.Exhausted:
			msg := fmt.Sprintf("attempt %d ended without finishing and no attempts remain", claim.Attempt)
			x.finishUnleased(ctx, rec, env, wire.StatusFailed, msg, "attempts_exhausted")
			return Finished
		case lease.Acquired:
			switch x.attempt(ctx, rec, env, turnID, claim, acquiredAt) {
			case attemptFinished:
				return Finished
			case attemptHandedOff:
				return HandedOff
			case attemptRetry:
				if !x.sleep(ctx, backoff(x.cfg.RetryBackoff, claim.Attempt)) {
					return HandedOff
				}
			case attemptLost:
			}
		}
	}
}

type attemptResult int

const (
	attemptFinished attemptResult = iota
	attemptHandedOff
	attemptRetry
	attemptLost
)

// attempt runs one attempt of the turn env (whose ID's text is turnID) under the lease claim took.
func (x *Executor) attempt(ctx context.Context, rec *kgo.Record, env wire.Envelope, turnID string, claim lease.Claim, acquiredAt time.Time) attemptResult {
	start := time.Now()
	sink := &attemptSink{
		pub: x.cfg.Publish, retried: x.hooks.PublishRetried, sessionID: env.SessionID, turnID: turnID, attempt: claim.Attempt, token: claim.Token, rec: rec,
		traceparent: header(rec, "traceparent"), log: x.log,
	}
	base := wire.EventBase{TurnID: turnID, Attempt: claim.Attempt}
	ended := func(outcome string) {
		if x.hooks.AttemptEnded != nil {
			x.hooks.AttemptEnded(outcome, claim.Attempt, time.Since(start))
		}
	}

	if remaining := time.Until(env.Deadline); remaining < x.cfg.MinUsefulTime {
		msg := fmt.Sprintf("deadline %s leaves %v, below the minimum useful time %v", env.Deadline.Format(time.RFC3339Nano), remaining.Round(time.Millisecond), x.cfg.MinUsefulTime)
		if x.finish(ctx, env, claim, sink, wire.StatusExpired, wire.NewEvent(wire.EventExpired, wire.ErrorData{EventBase: base, Error: msg}), msg, "") {
			ended("expired")
			return attemptFinished
		}
		return attemptLost
	}

	// Deferred before cancel, so it runs after it: a lingering publish of held events (hold) runs
	// with the turn's context, and the attempt waits for it rather than leave it running.
	defer sink.discard()
	attemptCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	sink.waits, sink.cancel = &x.waits, cancel
	x.renewer.Track(env.TurnID, claim.Token, acquiredAt, cancel)
	defer x.renewer.Untrack(env.TurnID)

	if claim.Attempt > 1 {
		if x.hooks.Takeover != nil {
			x.hooks.Takeover()
		}
		sink.hold(ctx, wire.NewEvent(wire.EventRetrying, wire.RetryingData{EventBase: base, PreviousAttempt: claim.Attempt - 1}))
	}
	// turn.started goes out with the agent's first events, or with its turn.completed if the agent
	// finishes within heldLinger (see hold); a refusal of it ends the attempt as it always did, only
	// later: where the agent's event was refused, or before the completion.
	sink.hold(ctx, wire.NewEvent(wire.EventStarted, wire.StartedData{EventBase: base, SessionID: wire.ClientSessionID(env.SessionID)}))
	// LogAttrs on the two lines every turn logs: an int or a duration passed as a key-value pair is
	// put in an interface, an allocation even with the level off (the "turn succeeded" line was
	// about 4% of the process's CPU samples in a profile of the peer drain, 1% with LogAttrs).
	x.log.LogAttrs(ctx, slog.LevelInfo, "turn started", slog.Int("attempt", claim.Attempt))

	history, err := x.history(attemptCtx, env.SessionID, claim.SessionSeq)
	if err != nil {
		return x.failedAttempt(ctx, attemptCtx, env, claim, sink, err, ended)
	}
	var prior []agent.PriorEvent
	if claim.Attempt > 1 && x.cfg.Prior != nil {
		if prior, err = x.cfg.Prior(attemptCtx, env.SessionID, turnID, env.AcceptedAt, claim.Attempt); err != nil {
			return x.failedAttempt(ctx, attemptCtx, env, claim, sink, err, ended)
		}
	}
	agentCtx, cancelDeadline := context.WithDeadline(attemptCtx, env.Deadline)
	agentCtx, aspan := telemetry.StartChild(agentCtx, "worker.agent")
	res, err := x.runAgent(agentCtx, agent.Turn{
		TurnID: env.TurnID.String(), SessionID: wire.ClientSessionID(env.SessionID), Tenant: env.Tenant, Attempt: claim.Attempt,
		Text: env.Input.Text, Metadata: env.Metadata, Deadline: env.Deadline, Prior: prior,
	}, history, sink)
	telemetry.End(aspan, err)
	cancelDeadline()
	if err == nil {
		// What is still held (turn.started, and the deltas of an agent that finished within
		// heldLinger) goes out with turn.completed, once the completion committed: one group.
		err = sink.keepHeld()
	}
	if err != nil && sink.heldFailure() != nil {
		return x.interrupted(ctx, attemptCtx, env, claim, sink, err, ended)
	}
	if err != nil {
		return x.failedAttempt(ctx, attemptCtx, env, claim, sink, err, ended)
	}

	output := wire.Output{Text: res.Text}
	seq, err := x.cfg.Complete(ctx, lease.Completion{TurnID: env.TurnID, Token: claim.Token, Output: output})
	if err != nil {
		if errors.Is(err, lease.ErrFenced) {
			x.log.WarnContext(ctx, "completion fenced: another attempt took over", "attempt", claim.Attempt)
			ended("lease_lost")
			return attemptLost
		}
		return x.failedAttempt(ctx, attemptCtx, env, claim, sink, err, ended)
	}
	if seq > 0 && x.cfg.HistoryAppended != nil {
		msgs := agent.TurnMessages(seq, env.TurnID.String(), env.Input.Text, output.Text)
		x.cfg.HistoryAppended(env.SessionID, seq, msgs[:]...)
	}
	// The row is terminal now; the completed event follows, behind the events still held. Should
	// this process die in between, the redelivered record finds DONE and republishes the terminal
	// event (at most once per turn); held deltas are then lost with the process, as they are when
	// it dies before the linger ran out. The publish keeps trying through a Redis outage of up to
	// terminalPatience; should Redis stay unreachable longer, the turn stays succeeded (its output
	// is in Postgres, GET /v1/turns/{id}) and the stream lacks the group. A slow agent's events are
	// refused, and its attempt retried, before the completion as they always were.
	if err := sink.publishTerminal(ctx, wire.NewEvent(wire.EventCompleted, wire.CompletedData{EventBase: base, Output: output})); err != nil {
		x.log.ErrorContext(ctx, "publish turn.completed failed after completion", "err", err)
	}
	x.log.LogAttrs(ctx, slog.LevelInfo, "turn succeeded", slog.Int("attempt", claim.Attempt), slog.Duration("took", time.Since(start).Round(time.Millisecond)))
	ended("succeeded")
	return attemptFinished
}

func (x *Executor) runAgent(ctx context.Context, turn agent.Turn, history []agent.Message, sink agent.Sink) (res agent.Result, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = panicError{v}
		}
	}()
	return x.agent.Run(ctx, turn, history, sink)
}

func (x *Executor) history(ctx context.Context, sessionID string, lastSeq int64) ([]agent.Message, error) {
	if x.cfg.History != nil {
		return x.cfg.History(ctx, sessionID, lastSeq)
	}
	return x.store.History(ctx, sessionID)
}

// interrupted handles an attempt whose context ended or whose publish was refused.
func (x *Executor) interrupted(ctx, attemptCtx context.Context, env wire.Envelope, claim lease.Claim, sink *attemptSink, err error, ended func(string)) attemptResult {
	cause := context.Cause(attemptCtx)
	base := wire.EventBase{TurnID: env.ShownTurnID(), Attempt: claim.Attempt}
	switch {
	case errors.Is(err, streams.ErrStaleToken), errors.Is(cause, ErrLeaseLost):
		x.log.WarnContext(ctx, "attempt lost its lease", "attempt", claim.Attempt)
		ended("lease_lost")
		return attemptLost
	case errors.Is(cause, ErrCancelRequested):
		if x.finish(ctx, env, claim, sink, wire.StatusCancelled, wire.NewEvent(wire.EventCancelled, wire.ErrorData{EventBase: base, Error: "cancelled"}), "cancelled", "") {
			ended("cancelled")
			return attemptFinished
		}
		return attemptLost
	case errors.Is(cause, ErrDraining) || ctx.Err() != nil:
		relCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		// The attempt began: its turn.started goes out before the turn is handed off.
		if err := sink.flushHeld(relCtx); err != nil && !errors.Is(err, streams.ErrStaleToken) {
			x.log.WarnContext(ctx, "publish of turn.started failed on hand-off", "err", err)
		}
		if err := x.store.Release(relCtx, env.TurnID, claim.Token, true); err != nil && !errors.Is(err, lease.ErrFenced) {
			x.log.WarnContext(ctx, "release on drain failed; the lease will expire instead", "err", err)
		}
		x.log.InfoContext(ctx, "turn handed off on drain", "attempt", claim.Attempt)
		ended("handed_off")
		return attemptHandedOff
	}
	return attemptRetry
}

func (x *Executor) failedAttempt(ctx, attemptCtx context.Context, env wire.Envelope, claim lease.Claim, sink *attemptSink, err error, ended func(string)) attemptResult {
	if attemptCtx.Err() != nil || errors.Is(err, streams.ErrStaleToken) {
		if r := x.interrupted(ctx, attemptCtx, env, claim, sink, err, ended); r != attemptRetry {
			return r
		}
	}
	base := wire.EventBase{TurnID: env.ShownTurnID(), Attempt: claim.Attempt}
	msg := err.Error()
	if errors.Is(err, context.DeadlineExceeded) && time.Now().After(env.Deadline) {
		msg = "deadline exceeded"
		if x.finish(ctx, env, claim, sink, wire.StatusFailed, wire.NewEvent(wire.EventFailed, wire.ErrorData{EventBase: base, Error: msg}), msg, "") {
			ended("failed")
			return attemptFinished
		}
		return attemptLost
	}
	if claim.Attempt >= x.cfg.MaxAttempts || errors.Is(err, agent.ErrPermanent) {
		x.log.ErrorContext(ctx, "turn failed", "attempt", claim.Attempt, "err", err)
		if x.finish(ctx, env, claim, sink, wire.StatusFailed, wire.NewEvent(wire.EventFailed, wire.ErrorData{EventBase: base, Error: msg}), msg, "failed") {
			ended("failed")
			return attemptFinished
		}
		return attemptLost
	}
	x.log.WarnContext(ctx, "attempt failed; will retry", "attempt", claim.Attempt, "err", err)
	// The attempt began: its turn.started goes out before the next attempt's turn.retrying.
	if err := sink.flushHeld(ctx); err != nil && !errors.Is(err, streams.ErrStaleToken) {
		x.log.WarnContext(ctx, "publish of turn.started failed", "err", err)
	}
	_ = x.store.RecordError(ctx, env.TurnID, claim.Token, msg)
	if err := x.store.Release(ctx, env.TurnID, claim.Token, false); err != nil && !errors.Is(err, lease.ErrFenced) {
		x.log.WarnContext(ctx, "release after failed attempt failed; the lease will expire instead", "err", err)
	}
	ended("retried")
	return attemptRetry
}

// finish ends the turn with a non-success status and publishes its terminal event. It reports false
// when the attempt was fenced.
func (x *Executor) finish(ctx context.Context, env wire.Envelope, claim lease.Claim, sink *attemptSink, status wire.Status, ev wire.Event, msg, deadLetter string) bool {
	if err := x.store.Finish(ctx, env.TurnID, claim.Token, status, msg, deadLetter); err != nil {
		if !errors.Is(err, lease.ErrFenced) {
			x.log.ErrorContext(ctx, "finish turn failed", "status", status, "err", err)
		}
		return false
	}
	if err := sink.publishTerminal(ctx, ev); err != nil {
		x.log.ErrorContext(ctx, "publish terminal event failed", "event", ev.Type, "err", err)
	}
	x.log.InfoContext(ctx, "turn ended", "status", status, "attempt", claim.Attempt)
	if deadLetter != "" {
		x.deadLetterTurn(ctx, sink.rec, env, deadLetter, msg, claim.Attempt)
	}
	return true
}

func (x *Executor) finishUnleased(ctx context.Context, rec *kgo.Record, env wire.Envelope, status wire.Status, msg, deadLetter string) {
	token, attempt, err := x.store.FinishUnleased(ctx, env.TurnID, status, msg, deadLetter)
	if err != nil {
		if !errors.Is(err, lease.ErrFenced) {
			x.log.ErrorContext(ctx, "finish unleased turn failed", "status", status, "err", err)
		}
		return
	}
	et := wire.EventFailed
	if status == wire.StatusCancelled {
		et = wire.EventCancelled
	}
	sink := &attemptSink{pub: x.cfg.Publish, retried: x.hooks.PublishRetried, sessionID: env.SessionID, turnID: env.ShownTurnID(), attempt: attempt, token: token}
	if err := sink.publishTerminal(ctx, wire.NewEvent(et, wire.ErrorData{EventBase: wire.EventBase{TurnID: env.ShownTurnID(), Attempt: attempt}, Error: msg})); err != nil {
		x.log.ErrorContext(ctx, "publish terminal event failed", "event", et, "err", err)
	}
	x.log.InfoContext(ctx, "turn ended", "status", status)
	if deadLetter != "" {
		x.deadLetterTurn(ctx, rec, env, deadLetter, msg, attempt)
	}
}

// expire ends a turn whose deadline leaves less than the minimum useful time, before any claim. It
// reports false when the turn was not expired here (held by a live worker, finished, cancelled, or
// the statement failed): the claim that follows sorts those out.
func (x *Executor) expire(ctx context.Context, rec *kgo.Record, env wire.Envelope) bool {
	remaining := time.Until(env.Deadline)
	msg := fmt.Sprintf("deadline %s leaves %v, below the minimum useful time %v", env.Deadline.Format(time.RFC3339Nano), remaining.Round(time.Millisecond), x.cfg.MinUsefulTime)
	token, attempt, err := x.store.Expire(ctx, lease.ClaimRequest{Env: env, Partition: rec.Partition, Offset: rec.Offset}, msg)
	if err != nil {
		if !errors.Is(err, lease.ErrFenced) {
			x.log.WarnContext(ctx, "expire turn failed", "err", err)
		}
		return false
	}
	sink := &attemptSink{
		pub: x.cfg.Publish, retried: x.hooks.PublishRetried, sessionID: env.SessionID, turnID: env.ShownTurnID(), attempt: attempt, token: token,
		traceparent: header(rec, "traceparent"),
	}
	ev := wire.NewEvent(wire.EventExpired, wire.ErrorData{EventBase: wire.EventBase{TurnID: env.ShownTurnID(), Attempt: attempt}, Error: msg})
	if err := sink.publishTerminal(ctx, ev); err != nil {
		x.log.ErrorContext(ctx, "publish terminal event failed", "event", ev.Type, "err", err)
	}
	x.log.InfoContext(ctx, "turn expired before it started", "remaining", remaining.Round(time.Millisecond))
	if x.hooks.AttemptEnded != nil {
		x.hooks.AttemptEnded("expired", attempt, 0)
	}
	return true
}

// republishTerminal makes sure a finished turn's terminal event is in its stream: the process that
// finished it may have died between the Postgres commit and the publish. The publish script keeps
// at most one terminal event per turn, so this is a no-op in the usual case.
func (x *Executor) republishTerminal(ctx context.Context, rec *kgo.Record, env wire.Envelope) {
	f, err := x.store.Final(ctx, env.TurnID)
	if err != nil {
		x.log.WarnContext(ctx, "read finished turn failed", "err", err)
		return
	}

	base := wire.EventBase{TurnID: env.ShownTurnID(), Attempt: f.Attempt}
	var ev wire.Event
	switch f.Status {
	case wire.StatusSucceeded:
		ev = wire.NewEvent(wire.EventCompleted, wire.CompletedData{EventBase: base, Output: f.Output})
	case wire.StatusCancelled:
		ev = wire.NewEvent(wire.EventCancelled, wire.ErrorData{EventBase: base, Error: f.Error})
	case wire.StatusExpired:
		ev = wire.NewEvent(wire.EventExpired, wire.ErrorData{EventBase: base, Error: f.Error})
	default:
		ev = wire.NewEvent(wire.EventFailed, wire.ErrorData{EventBase: base, Error: f.Error})
	}
	sink := &attemptSink{pub: x.cfg.Publish, retried: x.hooks.PublishRetried, sessionID: env.SessionID, turnID: env.ShownTurnID(), attempt: f.Attempt, token: f.Token}
	if err := sink.publishTerminal(ctx, ev); err != nil && !errors.Is(err, streams.ErrStaleToken) {
		x.log.WarnContext(ctx, "republish terminal event failed", "err", err)
	}
	if f.DeadLetter != "" {
		// The worker that failed the turn died before its dead letter was acknowledged.
		x.deadLetterTurn(ctx, rec, env, f.DeadLetter, f.Error, f.Attempt)
	}
}

// deadLetterTurn copies a failed turn's record to the dead-letter topic and then clears the turn's
// pending dead-letter mark; a crash in between leaves the mark, and the redelivered record writes the
// dead letter again (at least once).
func (x *Executor) deadLetterTurn(ctx context.Context, rec *kgo.Record, env wire.Envelope, reason, msg string, attempts int) {
	if !x.deadLetter(ctx, rec, reason, msg, attempts) {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := x.store.DeadLettered(cctx, env.TurnID); err != nil {
		x.log.WarnContext(ctx, "recording the dead letter failed; it may be written again", "err", err)
	}
}

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
	if err := x.dlq.ProduceSync(pctx, out).FirstErr(); err != nil {
		x.log.ErrorContext(ctx, "dead-letter produce failed", "reason", reason, "err", err)
		return false
	}
	if x.hooks.DeadLettered != nil {
		x.hooks.DeadLettered(reason)
	}
	return true
}

func header(rec *kgo.Record, key string) string {
	for _, h := range rec.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

func backoff(base time.Duration, attempt int) time.Duration {
	d := base << min(attempt-1, 6)
	return d/2 + rand.N(d) //nolint:gosec // jitter needs no cryptographic randomness
}
