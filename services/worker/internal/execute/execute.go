package execute

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/turnstile-run/turnstile/pkg/logging"
	"github.com/turnstile-run/turnstile/pkg/streams"
	"github.com/turnstile-run/turnstile/pkg/telemetry"
	"github.com/turnstile-run/turnstile/pkg/turnstore"
	"github.com/turnstile-run/turnstile/pkg/wire"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent"
	"github.com/turnstile-run/turnstile/services/worker/internal/batch"
	"github.com/turnstile-run/turnstile/services/worker/internal/consume"
	"github.com/turnstile-run/turnstile/services/worker/internal/lease"
)

// Defaults.
const (
	RetryBackoffDefault = 200 * time.Millisecond
	LeasedPollDefault   = 250 * time.Millisecond
)

// Config tunes an Executor and names every collaborator its turns share.
type Config struct {
	// Leases claims and completes turns, many at a time (the defaults of Claims and Completions),
	// and records a turn expired before its claim. Required.
	Leases *lease.Store
	// Turns runs the single statements on a turn's row: release, error, finish, final outcome,
	// dead-letter mark and the uncached history read. Required.
	Turns *turnstore.Store
	// Streams publishes the attempts' events when Publishes is nil.
	Streams *streams.Publisher
	// Agent runs the turns. Required.
	Agent agent.Agent
	// Renewer keeps the running attempts' leases alive and ends an attempt whose lease is lost or
	// whose turn's cancel was requested. Required.
	Renewer *lease.Renewer
	// DeadLetters receives poison records for DLQTopic. Nil leaves them unwritten (tests).
	DeadLetters DeadLetterer
	// Log is the executor's logger. Required.
	Log *slog.Logger
	// Hooks observe outcomes.
	Hooks Hooks

	MaxAttempts   int
	MinUsefulTime time.Duration
	DLQTopic      string
	// RetryBackoff is the base pause before a failed attempt is retried; it doubles per attempt,
	// with jitter. Defaults to RetryBackoffDefault (200ms).
	RetryBackoff time.Duration
	// LeasedPoll is how often a turn held by another live worker is re-checked. Defaults to
	// LeasedPollDefault (250ms).
	LeasedPoll time.Duration
	// Claims, Completions and Publishes carry the hot path's calls: the worker passes its
	// group-commit batchers (package batch), which send many turns' requests in one round trip
	// while each turn waits for its own result, in its own order. Each defaults to one round trip
	// per call: batch.Func over the lease store's ClaimMany or CompleteMany, and the publisher's
	// PublishMany.
	Claims      Claimer
	Completions Completer
	Publishes   Publisher
	// History reads a session's history (the worker passes its cache, history.Cache); if it is
	// also a HistoryAppender, it learns of the messages every completion appended. Defaults to
	// reading it from Turns, one query per attempt.
	History History
	// Prior, when set, reads what earlier attempts of a turn published; attempts after the first
	// receive it as agent.Turn.Prior.
	Prior PriorReader
}

// Claimer claims a turn (lease.Store.Claim): a lease with a fresh fencing token when the turn may
// run here, or what stands in its way.
type Claimer interface {
	Do(ctx context.Context, req lease.ClaimRequest) (lease.Claim, error)
}

// Completer commits a turn's success and appends its messages to the session history, fenced by
// the attempt's token (lease.Store.CompleteMany, for one completion). It returns the history's
// sequence number after the turn's messages, or 0 when it does not know it, and turnstore.ErrFenced
// when another attempt holds the turn.
type Completer interface {
	Do(ctx context.Context, c lease.Completion) (int64, error)
}

// Publisher publishes one attempt's group of events in the order given, in one call of the
// publish script, and returns one result per event. An error (the batcher stopped, or ctx ended)
// is every event's.
type Publisher interface {
	Do(ctx context.Context, group []streams.Message) ([]streams.PublishResult, error)
}

// Idler is an optional interface of a Publisher, found by type assertion: Idle reports whether a
// group given now would be sent at once (batch.Batcher's Idle). A quick agent's held events are
// published as it returns only while it does; otherwise they go out with its turn.completed (see
// release). It must be fast and safe for concurrent use.
type Idler interface {
	Idle() bool
}

// History reads a session's history for an attempt. lastSeq is the history's last sequence number
// as the claim read it (lease.Claim.SessionSeq), so a cache can answer without a round trip.
type History interface {
	GetAt(ctx context.Context, session wire.SessionKey, lastSeq int64) ([]agent.Message, error)
}

// HistoryAppender is what a History that keeps history implements to learn of the two messages a
// completion appended to a session's history (the worker's cache extends itself with them, so the
// session's next turn reads no history from Postgres). lastSeq is the assistant message's sequence
// number. It must be fast and safe for concurrent use.
type HistoryAppender interface {
	Appended(session wire.SessionKey, lastSeq int64, msgs ...agent.Message)
}

// PriorReader reads what earlier attempts of a turn published.
type PriorReader interface {
	Prior(ctx context.Context, session wire.SessionKey, turnID string, acceptedAt time.Time, attempt int) ([]agent.PriorEvent, error)
}

// DeadLetterer writes a record to the dead-letter topic (its Topic is Config.DLQTopic) and
// returns once Kafka has acknowledged it, or why not (the worker passes its deadletter.Producer).
// It must be safe for concurrent use.
type DeadLetterer interface {
	DeadLetter(ctx context.Context, rec *kgo.Record) error
}

// Hooks observe outcomes (metrics, tests). Every field is optional; hooks must be fast and safe for
// concurrent use.
type Hooks struct {
	// AttemptEnded is called when an attempt ends with its outcome: succeeded, failed, retried,
	// cancelled, expired, lease_lost, handed_off.
	AttemptEnded func(outcome string, attempt int, took time.Duration)
	// DeadLettered is called after a record was written to the dead-letter topic.
	DeadLettered func(reason string)
	// Takeover is called when an attempt takes a turn over from an earlier attempt that stopped
	// renewing its lease (its worker died, stalled or was partitioned away): the claim took a
	// lease that expired while held, and not the lease this turn path's own earlier attempt held.
	Takeover func()
	// Retry is called when an attempt after the first is no takeover, with its cause: "released"
	// (the earlier attempt failed and released the lease, or handed the turn off on drain) or
	// "own_lease" (this turn path's own earlier attempt's lease expired: its turn.started was
	// refused, or its renewal failed, and no other worker took the turn meanwhile).
	Retry func(cause string)
	// Blocked is called when a claim found an earlier turn of the session not terminal, and the
	// record was deferred (consume.Defer).
	Blocked func()
	// Paused is called when a claim found the turn's queue paused (turnstore.ClaimPaused), and
	// the record is deferred.
	Paused func()
	// PublishRetried is called before each further try of a group of events Redis could not take
	// (unreachable, or an error of the call); terminal says the group ends the turn (see
	// terminalPatience).
	PublishRetried func(terminal bool)
	// Succeeded is called with a turn's usage once its completion committed (the statement that
	// also adds it to token_usage), so each turn's usage is counted once.
	Succeeded func(tenant string, usage wire.Usage)
}

// Executor runs turn records.
type Executor struct {
	cfg     Config
	store   *lease.Store
	turns   *turnstore.Store
	agent   agent.Agent
	renewer *lease.Renewer
	dlq     DeadLetterer
	log     *slog.Logger
	hooks   Hooks
	// appended is cfg.History as a HistoryAppender, or nil.
	appended HistoryAppender
	waits    waitSet
	// linger is how long an attempt holds its first events (heldLinger when zero; tests lengthen it).
	linger time.Duration
	// publishIdle is cfg.Publishes' Idle when it is an Idler, or nil.
	publishIdle func() bool
	// maxAttempts is cfg.MaxAttempts until SetMaxAttempts changes it.
	maxAttempts atomic.Int32
	// path is the turn path, chained from stages.
	path handler
}

// New returns an executor of the collaborators and settings cfg names.
func New(cfg Config) *Executor {
	store := cfg.Leases
	if cfg.RetryBackoff == 0 {
		cfg.RetryBackoff = RetryBackoffDefault
	}
	if cfg.LeasedPoll == 0 {
		cfg.LeasedPoll = LeasedPollDefault
	}
	if cfg.Claims == nil {
		cfg.Claims = batch.Func[lease.ClaimRequest, lease.Claim](store.ClaimMany)
	}
	if cfg.Completions == nil {
		cfg.Completions = batch.Func[lease.Completion, int64](store.CompleteMany)
	}
	if cfg.Publishes == nil {
		cfg.Publishes = unbatched{cfg.Streams}
	}
	if cfg.History == nil {
		cfg.History = storeHistory{cfg.Turns}
	}
	x := &Executor{
		cfg: cfg, store: store, turns: cfg.Turns, agent: cfg.Agent, renewer: cfg.Renewer, dlq: cfg.DeadLetters,
		log: cfg.Log, hooks: cfg.Hooks,
	}
	x.maxAttempts.Store(int32(min(cfg.MaxAttempts, math.MaxInt32)))
	x.path = chain(x.runAttempt, x.stages()...)
	x.appended, _ = cfg.History.(HistoryAppender)
	if i, ok := cfg.Publishes.(Idler); ok {
		x.publishIdle = i.Idle
	}
	return x
}

// SetMaxAttempts changes the attempt limit (an agents-file reload): an attempt ending from now on
// is judged by it, and the lease store claims with it.
func (x *Executor) SetMaxAttempts(n int) {
	x.maxAttempts.Store(int32(min(n, math.MaxInt32)))
	if x.store != nil {
		x.store.SetMaxAttempts(n)
	}
}

// unbatched publishes each group with its own script call.
type unbatched struct{ pub *streams.Publisher }

func (u unbatched) Do(ctx context.Context, group []streams.Message) ([]streams.PublishResult, error) {
	return u.pub.PublishMany(ctx, group), nil
}

// storeHistory reads a session's history from Postgres, whatever the claim saw: each succeeded
// turn's question and answer (agent.TurnMessages of its history entry), oldest first. It is the
// uncached read; the worker's history cache (package history) reads the same entries
// incrementally.
type storeHistory struct{ db *turnstore.Store }

func (h storeHistory) GetAt(ctx context.Context, session wire.SessionKey, _ int64) ([]agent.Message, error) {
	entries, err := h.db.ReadHistory(ctx, session)
	if err != nil {
		return nil, err
	}
	var out []agent.Message
	for _, e := range entries {
		msgs := agent.TurnMessages(e.Seq, e.TurnID, e.Question, e.Answer)
		out = append(out, msgs[:]...)
	}
	return out, nil
}

// Handle runs the record's turn along the turn path (see stages) to its end. ctx is the consumer's
// turn context: cancelled with consume.ErrDraining when the drain grace period is over. It is a
// consume.Handler.
func (x *Executor) Handle(ctx context.Context, rec *kgo.Record) consume.Result {
	return x.path(&turn{x: x, ctx: ctx, log: x.log, rec: rec})
}

// open decodes the record's turn and gives it its log context and span. It reports false when the
// record was undecodable and was dead-lettered.
func (t *turn) open() bool {
	x, ctx, rec := t.x, t.ctx, t.rec
	env, rawMetadata, err := wire.DecodeEnvelopeRaw(rec.Value)
	if err != nil {
		x.log.Error("undecodable turn record sent to dead-letter topic", "partition", rec.Partition, "offset", rec.Offset, "err", err)
		x.deadLetter(ctx, rec, "undecodable", err.Error(), 0)
		return false
	}
	// The turn ID's text as the client knows it (wire.Envelope.ShownTurnID), made once for the
	// turn: the log context, the span and every attempt's events share it. The stores and the
	// agent get env.TurnID, which is unique across tenants.
	turnID := env.ShownTurnID()
	// The session's key names it in every store; the envelope keeps the client's session ID,
	// which the agent, the events and the log lines show. The key comes from the envelope, never
	// the record's key, so records written before sessions were keyed by tenant land in the same
	// session.
	session := env.SessionKey()
	ctx = logging.With(ctx, slog.String("turn_id", turnID), slog.String("session_id", env.SessionID), slog.String("tenant", env.Tenant))
	ctx, span := telemetry.Start(telemetry.ExtractRecord(ctx, rec), "worker.turn", trace.WithSpanKind(trace.SpanKindConsumer), telemetry.TurnAttributes(turnID, session, 0))
	if env.Agent != "" { // a record from before agents had names is the default agent's
		span.SetAttributes(telemetry.AgentAttribute(env.Agent))
	}
	t.ctx, t.span, t.env, t.session, t.rawMetadata, t.id = ctx, span, env, session, rawMetadata, turnID
	return true
}

// acquired is what runAttempt needs of a claim that acquired the turn's lease.
type acquired struct {
	attempt    int
	token      wire.FenceToken
	sessionSeq int64
	acquiredAt time.Time
	// unstorable is the claim's refusal of the record's data (unstorable.go), when only the
	// record's storable form could be claimed.
	unstorable error
	// expiredOwner is, when the claim took over a lease that expired while held, its holder
	// (lease.Claim.ExpiredOwner); ownLease says that lease was this turn path's own earlier
	// attempt's (same fencing token), so the attempt is a retry, not a takeover.
	expiredOwner string
	ownLease     bool
}

// Retry causes (Hooks.Retry).
const (
	RetryReleased = "released"
	RetryOwnLease = "own_lease"
)

// turn is one record's turn on its way through the turn path: what its stages and attempts share.
// decode fills it from the record; claimLease adds the lease it acquired.
type turn struct {
	x *Executor
	// ctx is the turn's context: the consumer's turn context with the turn's log attributes and
	// span. It ends only when the worker stops waiting for its turns (consume.ErrDraining).
	ctx context.Context
	// span is the turn's span, ended when the turn's way through the path does (decode).
	span trace.Span
	log  *slog.Logger
	rec  *kgo.Record
	env  wire.Envelope
	// session is the session's key (env.SessionKey), what the stores and the stream take.
	session wire.SessionKey
	// id is the turn's ID as the client knows it (wire.Envelope.ShownTurnID): its events and log
	// lines carry it; the stores and the agent get env.TurnID, which is unique across tenants.
	id string
	// rawMetadata is env.Metadata as the record held it: the claim stores these bytes.
	rawMetadata json.RawMessage
	// acq is the lease the turn's last claim acquired, set by claimLease for runAttempt.
	acq acquired
	// outrun says an attempt of this path lost the turn to another attempt (fenced, or its lease
	// gone): the attempt that finished the turn published its terminal event, so a claim that then
	// finds the turn done does not publish it again.
	outrun bool
}

// claimRequest is the claim of the turn's record.
func (t *turn) claimRequest() lease.ClaimRequest {
	return lease.ClaimRequest{Env: t.env, RawMetadata: t.rawMetadata, Partition: t.rec.Partition, Offset: t.rec.Offset}
}

// claim sends req under a span of its own.
func (t *turn) claim(req lease.ClaimRequest) (lease.Claim, error) {
	cctx, cspan := telemetry.StartChild(t.ctx, "worker.claim")
	claim, err := t.x.cfg.Claims.Do(cctx, req)
	if cspan.IsRecording() {
		cspan.SetAttributes(attribute.String("turnstile.claim", string(claim.Outcome)), attribute.Int("turnstile.attempt", claim.Attempt))
	}
	telemetry.End(cspan, err)
	return claim, err
}

// attempt returns the turn's attempt number under the fencing token token, with the sink that
// publishes its events: the one place an attempt and its sink are made, whether the attempt runs
// (a claim acquired the lease) or only ends the turn (a statement that ended it returned the
// token).
func (t *turn) attempt(number int, token wire.FenceToken) *attempt {
	x := t.x
	return &attempt{
		turn: t, number: number, token: token,
		sink: attemptSink{
			pub: x.cfg.Publishes, retried: x.hooks.PublishRetried, session: t.session, turnID: t.id, row: t.env.TurnID,
			attempt: number, token: token, traceparent: header(t.rec, "traceparent"), log: x.log, lingerFor: x.linger,
			idle: x.publishIdle,
		},
	}
}

// belowMinUseful says why a deadline that leaves remaining is too close to start the turn.
func (x *Executor) belowMinUseful(deadline time.Time, remaining time.Duration) string {
	return fmt.Sprintf("deadline %s leaves %v, below the minimum useful time %v", deadline.Format(time.RFC3339Nano), remaining.Round(time.Millisecond), x.cfg.MinUsefulTime)
}

// terminal is the event that announces a turn's end with status (other than succeeded) and msg.
func terminal(status wire.Status, base wire.EventBase, msg string) wire.Event {
	t := wire.EventFailed
	switch status {
	case wire.StatusCancelled:
		t = wire.EventCancelled
	case wire.StatusExpired:
		t = wire.EventExpired
	}
	return wire.NewEvent(t, wire.ErrorData{EventBase: base, Error: msg})
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
