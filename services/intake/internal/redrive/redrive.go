package redrive

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/turnstile-run/turnstile/pkg/agents"
	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/lifecycle"
	"github.com/turnstile-run/turnstile/pkg/pgarray"
	"github.com/turnstile-run/turnstile/pkg/streams"
	"github.com/turnstile-run/turnstile/pkg/turnstore"
	"github.com/turnstile-run/turnstile/pkg/wire"
	"github.com/turnstile-run/turnstile/services/intake/internal/announce"
)

// Defaults of Config.
const (
	GraceDefault        = 30 * time.Second
	UnknownAfterDefault = 2 * time.Minute
	HoldDefault         = 30 * time.Second
	BatchDefault        = 500
	// MaxBatchesPerRound bounds the batches one round re-drives, so a round ends in bounded time.
	MaxBatchesPerRound = 20
)

// OrphanError is the error an orphan (a lost turn whose row holds no input) fails with.
const OrphanError = "its Kafka record can no longer be consumed and it cannot be re-driven: " +
	"its row holds no input (it was accepted before migration 00100 recorded inputs)"

// ExpiredError is the error of a turn the round found past its deadline before it started.
const ExpiredError = "the deadline passed before the turn started"

// Config tunes a Redriver.
type Config struct {
	// Topic is the turns topic, the default agent's; every other agent's is Topic.<agent>
	// (pkg/agents).
	Topic string
	// Agents is the current agents catalog; each round re-drives every agent's turns to its own
	// topic. Nil is the catalog of one default agent. The turns of an agent no longer in the
	// catalog are not re-driven: they wait, as their records do, until it returns or their
	// deadline passes (README, "Many agents").
	Agents func() *agents.Catalog
	// Partitions is how many partitions an agent's topic is created with when a round finds it
	// missing (a restarted embedded broker). Defaults to config.PartitionsDefault.
	Partitions int
	// Region is this region's code (TURNSTILE_REGION), stamped on re-driven envelopes so their
	// events show the turn's prefixed ID; empty in single-region mode.
	Region string
	// Interval between rounds. Defaults to config.RedriveIntervalDefault (5s).
	Interval time.Duration
	// Grace is how long after its acceptance a turn's record is surely acknowledged, so an offset
	// at or above its partition's end offset means a truncated log. Defaults to GraceDefault
	// (30s; intake waits TURNSTILE_PRODUCE_TIMEOUT, 5s by default, for an acknowledgement).
	Grace time.Duration
	// UnknownAfter is the age at which a turn whose record's place is not known is re-driven (or
	// failed as an orphan). Defaults to UnknownAfterDefault (2m).
	UnknownAfter time.Duration
	// Hold is how long a re-driven turn is not taken again. Defaults to HoldDefault (30s).
	Hold time.Duration
	// Batch bounds the turns one statement takes. Defaults to BatchDefault (500).
	Batch int
	// ProduceTimeout bounds the produce of one batch. Defaults to config.ProduceTimeoutDefault.
	ProduceTimeout time.Duration
}

func (c *Config) applyDefaults() {
	if c.Interval <= 0 {
		c.Interval = config.RedriveIntervalDefault
	}
	if c.Grace <= 0 {
		c.Grace = GraceDefault
	}
	if c.UnknownAfter <= 0 {
		c.UnknownAfter = UnknownAfterDefault
	}
	if c.Hold <= 0 {
		c.Hold = HoldDefault
	}
	if c.Batch <= 0 {
		c.Batch = BatchDefault
	}
	if c.ProduceTimeout <= 0 {
		c.ProduceTimeout = config.ProduceTimeoutDefault
	}
	if c.Partitions <= 0 {
		c.Partitions = config.PartitionsDefault
	}
	if c.Agents == nil {
		one := agents.FromConfig(config.Default())
		c.Agents = func() *agents.Catalog { return one }
	}
}

// Redriver re-drives lost turns and ends unstartable ones; see the package doc.
type Redriver struct {
	cfg    Config
	store  *turnstore.Store
	client *kgo.Client
	adm    *kadm.Client
	events *streams.Publisher
	log    *slog.Logger

	mu       sync.Mutex
	topicIDs map[string]uuid.UUID // by topic
	rounds   map[string]int       // by topic

	redriven prometheus.Counter
	orphans  prometheus.Counter
	ended    *prometheus.CounterVec
	failures prometheus.Counter

	loop lifecycle.Loop
}

// New returns a re-driver that produces through client (intake's producer) and reads the topic's
// state through it. pool may be nil (nothing is done); events may be nil (terminal events of the
// turns it ends are then published by a worker reading their record, if it is still there). It
// registers its metrics with reg.
func New(cfg Config, pool *pgxpool.Pool, client *kgo.Client, events *streams.Publisher, log *slog.Logger, reg prometheus.Registerer) *Redriver {
	cfg.applyDefaults()
	r := &Redriver{
		cfg: cfg, client: client, adm: kadm.NewClient(client), events: events, log: log,
		topicIDs: map[string]uuid.UUID{}, rounds: map[string]int{},
		redriven: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "turnstile_intake_redriven_total",
			Help: "Accepted turns whose Kafka record was lost and was produced again from Postgres.",
		}),
		orphans: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "turnstile_intake_redrive_orphans_total",
			Help: "Lost turns that could not be re-driven (their row holds no input) and were failed.",
		}),
		ended: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "turnstile_intake_unstartable_ended_total",
			Help: "Unfinished turns nobody held that intake ended because they could no longer start, by status (expired, cancelled).",
		}, []string{"status"}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "turnstile_intake_redrive_failures_total",
			Help: "Re-drive rounds (or parts of them) that failed: Kafka's topic state unreadable, a produce or a statement failed.",
		}),
	}
	if pool != nil {
		r.store = turnstore.New(pool)
	}
	reg.MustRegister(r.redriven, r.orphans, r.ended, r.failures)
	return r
}

// TopicID is the ID of topic (an agent's topic) as the last round read it, or the zero UUID
// before the first read (or when the broker reports none). Intake records it with each queued
// row, read before the row's record is produced. Safe for concurrent use.
func (r *Redriver) TopicID(topic string) uuid.UUID {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.topicIDs[topic]
}

// ReadTopic reads the turns topic's state once, so TopicID knows the topic's ID; intake calls it
// as it starts, before it accepts turns, so the rows of its first turns know where their records
// went.
func (r *Redriver) ReadTopic(ctx context.Context) error {
	_, err := r.readTopic(ctx, r.cfg.Topic)
	return err
}

// Start runs a round at once and then every Interval, and returns at once.
func (r *Redriver) Start(ctx context.Context) error {
	r.loop.Start(ctx, func(ctx context.Context) {
		r.first(ctx)
		lifecycle.Every(ctx, r.cfg.Interval, func(ctx context.Context) { r.Round(ctx) })
	})
	return nil
}

// Stop ends the rounds and waits for the one running. Safe twice and before Start.
func (r *Redriver) Stop(ctx context.Context) error { return r.loop.Stop(ctx, "re-driver") }

// first is the first round, which says what became of the turns the last run left unfinished.
func (r *Redriver) first(ctx context.Context) {
	if r.store == nil {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, r.cfg.Interval+r.cfg.ProduceTimeout)
	defer cancel()
	queued, running, err := r.store.CountUnfinished(cctx)
	res := r.Round(ctx)
	if err != nil || ctx.Err() != nil {
		return
	}
	r.log.InfoContext(ctx, "accepted turns unfinished at start; those whose Kafka record was lost are re-driven from Postgres",
		"queued", queued, "running", running, "redriven", res.Redriven, "orphans", res.Orphans,
		"expired", res.Expired, "cancelled", res.Cancelled)
}

// Report logs how many accepted turns are unfinished and what happens to them; intake calls it
// as it stops.
func (r *Redriver) Report(ctx context.Context) {
	if r.store == nil {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	queued, running, err := r.store.CountUnfinished(cctx)
	if err != nil {
		r.log.WarnContext(ctx, "unfinished turns not counted at shutdown", "err", err)
		return
	}
	r.log.InfoContext(ctx, fmt.Sprintf("%d accepted turns are queued and %d running; any whose Kafka record is lost "+
		"(the embedded broker keeps records in memory only) will be re-driven from Postgres at the next start", queued, running),
		"queued", queued, "running", running)
}

// Result is what one round did.
type Result struct {
	Redriven, Orphans, Expired, Cancelled int
	// TopicRead says the topic's state was read (without it nothing is re-driven).
	TopicRead bool
}

// Round runs one round: end the unstartable turns, then re-drive the lost ones. The loop runs it
// every Interval; tests call it directly.
func (r *Redriver) Round(ctx context.Context) Result {
	var res Result
	if r.store == nil {
		return res
	}
	r.endUnstartable(ctx, &res)
	cat := r.cfg.Agents()
	for _, name := range cat.Names() {
		r.redriveAgent(ctx, cat, name, &res)
	}
	if res.Redriven > 0 {
		r.log.InfoContext(ctx, "re-drove accepted turns whose Kafka record was lost", "turns", res.Redriven)
	}
	return res
}

// redriveAgent re-drives one agent's lost turns to its topic.
func (r *Redriver) redriveAgent(ctx context.Context, cat *agents.Catalog, name string, res *Result) {
	topicName := cat.Topic(r.cfg.Topic, name)
	topic, err := r.readTopic(ctx, topicName)
	if err != nil {
		if ctx.Err() == nil {
			r.failures.Inc()
			r.log.WarnContext(ctx, "re-driver: an agent's topic state is unreadable; nothing of it re-driven this round",
				"agent", name, "topic", topicName, "err", err)
		}
		return
	}
	if name == cat.Default {
		res.TopicRead = true
	}
	where := lostWhere{topic: topicName, agent: name, isDefault: name == cat.Default}
	for range MaxBatchesPerRound {
		n, err := r.redriveBatch(ctx, topic, where, res)
		if err != nil {
			if ctx.Err() == nil {
				r.failures.Inc()
				r.log.WarnContext(ctx, "re-drive failed; the next round tries again", "err", err)
			}
			break
		}
		if n < r.cfg.Batch {
			break
		}
	}
}

// lostWhere is whose lost turns a batch takes and where their records go.
type lostWhere struct {
	topic, agent string
	isDefault    bool
}

// endUnstartable ends the turns that can no longer start and announces them.
func (r *Redriver) endUnstartable(ctx context.Context, res *Result) {
	for range MaxBatchesPerRound {
		cctx, cancel := context.WithTimeout(ctx, r.cfg.Interval+time.Second)
		ended, statuses, err := r.store.EndUnstartable(cctx, r.cfg.Batch, ExpiredError)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				r.failures.Inc()
				r.log.WarnContext(ctx, "ending unstartable turns failed", "err", err)
			}
			return
		}
		byStatus := map[wire.Status][]turnstore.Ended{}
		for i, e := range ended {
			byStatus[statuses[i]] = append(byStatus[statuses[i]], e)
			r.log.InfoContext(ctx, "turn ended before it started", "turn_id", e.ShownTurnID(r.cfg.Region),
				"session_id", e.Session.SessionID(), "status", statuses[i], "reason", e.Error)
		}
		for status, es := range byStatus {
			r.ended.WithLabelValues(string(status)).Add(float64(len(es)))
			if status == wire.StatusExpired {
				res.Expired += len(es)
			} else {
				res.Cancelled += len(es)
			}
			announce.Ended(ctx, r.events, r.log, r.cfg.Region, status, es)
		}
		if len(ended) < r.cfg.Batch {
			return
		}
	}
}

// readTopic reads topic's ID and offsets, and remembers the ID for TopicID. A topic missing from
// the metadata (an agent's topic on a restarted embedded broker, or before its first turn) is
// created first.
func (r *Redriver) readTopic(ctx context.Context, topic string) (turnstore.Topic, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.ProduceTimeout)
	defer cancel()
	details, err := r.adm.ListTopics(ctx, topic)
	if err != nil {
		return turnstore.Topic{}, fmt.Errorf("read topic %s: %w", topic, err)
	}
	d, ok := details[topic]
	if !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
		if _, err := r.adm.CreateTopic(ctx, int32(r.cfg.Partitions), -1, nil, topic); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return turnstore.Topic{}, fmt.Errorf("create topic %s: %w", topic, err)
		}
		if details, err = r.adm.ListTopics(ctx, topic); err != nil {
			return turnstore.Topic{}, fmt.Errorf("read topic %s: %w", topic, err)
		}
		if d, ok = details[topic]; !ok {
			return turnstore.Topic{}, fmt.Errorf("read topic %s: not in the metadata", topic)
		}
	}
	if d.Err != nil {
		return turnstore.Topic{}, fmt.Errorf("read topic %s: %w", topic, d.Err)
	}
	starts, err := r.adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return turnstore.Topic{}, fmt.Errorf("read start offsets of %s: %w", topic, err)
	}
	ends, err := r.adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return turnstore.Topic{}, fmt.Errorf("read end offsets of %s: %w", topic, err)
	}
	n := len(d.Partitions)
	t := turnstore.Topic{ID: uuid.UUID(d.ID), StartOffsets: make([]int64, n), EndOffsets: make([]int64, n)}
	for p := range n {
		s, sok := starts.Lookup(topic, int32(p))
		e, eok := ends.Lookup(topic, int32(p))
		if !sok || !eok || s.Err != nil || e.Err != nil {
			return turnstore.Topic{}, fmt.Errorf("read offsets of %s/%d: missing or failed", topic, p)
		}
		t.StartOffsets[p], t.EndOffsets[p] = s.Offset, e.Offset
	}
	r.mu.Lock()
	if was := r.topicIDs[topic]; was != t.ID && r.rounds[topic] > 0 {
		r.log.WarnContext(ctx, "a turns topic has a new ID (recreated, or the broker restarted without its records); "+
			"unfinished turns are re-driven from Postgres", "topic", topic, "was", was, "now", t.ID)
	}
	r.topicIDs[topic] = t.ID
	r.rounds[topic]++
	r.mu.Unlock()
	return t, nil
}

// redriveBatch takes one batch of lost turns, fails its orphans and produces the others' records
// again in acceptance order, and returns how many turns it took.
func (r *Redriver) redriveBatch(ctx context.Context, topic turnstore.Topic, where lostWhere, res *Result) (int, error) {
	now := time.Now()
	cctx, cancel := context.WithTimeout(ctx, r.cfg.Interval+time.Second)
	lost, err := r.store.TakeLost(cctx, &turnstore.LostParams{
		Topic: topic, AcceptedBefore: now.Add(-r.cfg.Grace), UnknownBefore: now.Add(-r.cfg.UnknownAfter),
		Hold: r.cfg.Hold, Limit: r.cfg.Batch, Agent: where.agent, Default: where.isDefault,
	})
	cancel()
	if err != nil || len(lost) == 0 {
		return 0, err
	}
	recs := make([]*kgo.Record, 0, len(lost))
	taken := make([]*turnstore.LostTurn, 0, len(lost))
	for i := range lost {
		l := &lost[i]
		l.Envelope.Region = r.cfg.Region
		if !l.HasInput {
			r.orphan(ctx, l, res)
			continue
		}
		value, err := l.Envelope.Encode()
		if err != nil {
			// Its metadata came out of jsonb: it encodes. Should it not, the turn is an orphan.
			r.orphan(ctx, l, res)
			continue
		}
		if l.Envelope.Agent == "" {
			l.Envelope.Agent = where.agent
		}
		rec := &kgo.Record{Topic: where.topic, Key: []byte(l.Session.String()), Value: value}
		if l.Traceparent != "" {
			rec.Headers = []kgo.RecordHeader{{Key: "traceparent", Value: []byte(l.Traceparent)}}
		}
		recs, taken = append(recs, rec), append(taken, l)
	}
	if len(recs) == 0 {
		return len(lost), nil
	}
	// One call, in acceptance order: the producer keeps the order of records of one partition,
	// so a session's re-driven turns arrive in the order intake accepted them.
	pctx, pcancel := context.WithTimeout(ctx, r.cfg.ProduceTimeout)
	results := r.client.ProduceSync(pctx, recs...)
	pcancel()
	done := turnstore.RedrivenParams{}
	if topic.ID != uuid.Nil {
		done.TopicID = &topic.ID
	}
	var failed pgarray.UUIDs
	var firstErr error
	for i, pr := range results {
		l := taken[i]
		if pr.Err != nil {
			failed = append(failed, pgarray.UUID(l.Envelope.TurnID))
			firstErr = cmpErr(firstErr, pr.Err)
			continue
		}
		done.TurnIDs = append(done.TurnIDs, pgarray.UUID(l.Envelope.TurnID))
		done.Partitions = append(done.Partitions, pgarray.Int(pr.Record.Partition))
		done.Offsets = append(done.Offsets, pgarray.Int(pr.Record.Offset))
		r.log.InfoContext(ctx, "turn re-driven: its Kafka record was lost", "turn_id", l.Envelope.ShownTurnID(),
			"session_id", l.Envelope.SessionID, "tenant", l.Envelope.Tenant, "status", l.Status,
			"accepted_at", l.Envelope.AcceptedAt, "redrives", l.Redrives, "agent", where.agent)
	}
	res.Redriven += len(done.TurnIDs)
	r.redriven.Add(float64(len(done.TurnIDs)))
	// Detached: what was produced is recorded even when the round is being stopped.
	wctx, wcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer wcancel()
	if len(done.TurnIDs) > 0 {
		if err := r.store.Redriven(wctx, &done); err != nil {
			// The records are in Kafka; the rows keep their old place and are taken again after
			// Hold, which only produces a harmless duplicate.
			firstErr = cmpErr(firstErr, err)
		}
	}
	if len(failed) > 0 {
		if err := r.store.Release(wctx, failed); err != nil {
			firstErr = cmpErr(firstErr, err)
		}
	}
	if firstErr != nil {
		return len(lost), fmt.Errorf("re-drive %d turns: %w", len(failed), firstErr)
	}
	return len(lost), nil
}

// orphan fails a lost turn that cannot be re-driven, so it neither blocks its session nor counts
// as backlog, and says so loudly.
func (r *Redriver) orphan(ctx context.Context, l *turnstore.LostTurn, res *Result) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	token, attempt, err := r.store.FinishUnleased(cctx, l.Envelope.TurnID, wire.StatusFailed, OrphanError, "")
	if err != nil {
		r.log.WarnContext(ctx, "orphan turn not failed; the next round tries again", "turn_id", l.Envelope.ShownTurnID(), "err", err)
		return
	}
	res.Orphans++
	r.orphans.Inc()
	r.log.ErrorContext(ctx, "orphan turn failed: its Kafka record is lost and its input was never recorded",
		"turn_id", l.Envelope.ShownTurnID(), "session_id", l.Envelope.SessionID, "tenant", l.Envelope.Tenant,
		"accepted_at", l.Envelope.AcceptedAt)
	e := turnstore.Ended{TurnID: l.Envelope.TurnID, Session: l.Session, Token: token, Attempt: attempt, Error: OrphanError}
	if l.Envelope.ClientTurnID != uuid.Nil {
		e.ClientTurnID = &l.Envelope.ClientTurnID
	}
	announce.Ended(ctx, r.events, r.log, r.cfg.Region, wire.StatusFailed, []turnstore.Ended{e})
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}
