package schedule

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnstile-run/turnstile/pkg/lifecycle"
	"github.com/turnstile-run/turnstile/pkg/region"
)

// Defaults of Config; pkg/config's TURNSTILE_SCHEDULER_* defaults are the same.
const (
	// PollIntervalDefault is the longest the scheduler sleeps between passes: a schedule another
	// replica created fires its first tick at most this late. Between passes it wakes at the
	// next tick it knows of.
	PollIntervalDefault = time.Second
	// LeaseTTLDefault is how long the owner of a claimed tick may take to post it before another
	// replica takes it over: the longest a SIGKILLed replica delays a tick it had claimed.
	LeaseTTLDefault = 15 * time.Second
	// MisfireGraceDefault is how late a tick may still fire: ticks older (every replica was down,
	// or intake refused the turn that long) are skipped and counted as missed.
	MisfireGraceDefault = time.Minute
	// RetentionDefault is how long an answered fire's row is kept.
	RetentionDefault = 24 * time.Hour
	// batch is the most due schedules or expired fires one statement reads.
	batch = 100
	// queryTimeout bounds one statement.
	queryTimeout = 5 * time.Second
	// pruneEvery is how often a replica prunes answered fires.
	pruneEvery = time.Minute
)

// MetadataKey is the member of a fired turn's metadata that names its schedule and tick; a
// schedule's own turn may not set it.
const MetadataKey = "schedule"

// Config tunes a Scheduler; zero fields take the defaults above.
type Config struct {
	// Owner names this replica in the fires it claims (the instance ID).
	Owner        string
	PollInterval time.Duration
	LeaseTTL     time.Duration
	MisfireGrace time.Duration
	Retention    time.Duration
	// Region is this region's code: the prefix of the sessions minted for ticks of schedules
	// without a session.
	Region string
}

// Outcome is what posting a fire's turn came to.
type Outcome int

const (
	// Posted is a turn intake accepted (or had accepted it before: the same idempotency key).
	Posted Outcome = iota
	// Retry is a post refused for now (503, 429) or not answered; the tick is posted again when its lease
	// runs out, by whichever replica takes it over.
	Retry
	// Refused is a post refused for good (the turn is invalid for the session, a 4xx); recorded, not retried.
	Refused
)

// Poster posts a fire's turn through intake's accept path, as the schedule's tenant, with the
// idempotency key, and says what came of it. It must be safe for concurrent use.
type Poster func(ctx context.Context, tenant, sessionID, idempotencyKey string, body []byte) (turnID string, out Outcome, detail string)

// Scheduler fires the ticks of every tenant's schedules. Every intake replica runs one: each tick
// is claimed by exactly one of them in Postgres (see Store.claim), posted through intake's accept
// path with an idempotency key derived from the schedule and the tick, and recorded as answered.
// A replica that dies between its claim and the answer leaves the fire's lease to run out; another
// replica then posts the same tick again, which intake maps to the same turn.
type Scheduler struct {
	cfg   Config
	store *Store
	post  Poster
	log   *slog.Logger

	fires     *prometheus.CounterVec
	missed    prometheus.Counter
	takeovers prometheus.Counter
	lateness  prometheus.Histogram

	lastPrune time.Time
	loop      lifecycle.Loop
}

// New returns a scheduler over store that posts through post; it registers its metrics with reg.
func New(cfg Config, store *Store, post Poster, log *slog.Logger, reg prometheus.Registerer) *Scheduler {
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = PollIntervalDefault
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = LeaseTTLDefault
	}
	if cfg.MisfireGrace <= 0 {
		cfg.MisfireGrace = MisfireGraceDefault
	}
	if cfg.Retention <= 0 {
		cfg.Retention = RetentionDefault
	}
	if cfg.Owner == "" {
		cfg.Owner = uuid.NewString()
	}
	s := &Scheduler{
		cfg: cfg, store: store, post: post, log: log,
		fires: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "turnstile_schedule_fires_total",
			Help: "Schedule ticks this replica posted, by outcome: posted, retry (refused for now; posted again after its lease), refused (for good), missed (given up past the misfire grace).",
		}, []string{"outcome"}),
		missed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "turnstile_schedule_ticks_missed_total",
			Help: "Schedule ticks skipped because they were older than the misfire grace when a replica came to them (every replica was down).",
		}),
		takeovers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "turnstile_schedule_takeovers_total",
			Help: "Claimed ticks this replica took over after their owner's lease ran out before the post was answered.",
		}),
		lateness: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "turnstile_schedule_fire_lateness_seconds",
			Help:    "Time from a tick to the answer of its post.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
		}),
	}
	if reg != nil {
		reg.MustRegister(s.fires, s.missed, s.takeovers, s.lateness)
	}
	return s
}

// Start begins firing and returns at once. Safe twice.
func (s *Scheduler) Start(ctx context.Context) error {
	s.loop.Start(ctx, s.run)
	return nil
}

// Stop ends firing and waits for the pass in progress (a post in flight is answered or cut by
// its context; its tick is then taken over after its lease). Safe twice and before Start.
func (s *Scheduler) Stop(ctx context.Context) error { return s.loop.Stop(ctx, "scheduler") }

func (s *Scheduler) run(ctx context.Context) {
	for {
		wait := s.Pass(ctx)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// Pass takes over expired fires, claims and posts every due tick, and returns how long to wait
// for the next (at most the poll interval). The loop calls it; tests call it directly.
func (s *Scheduler) Pass(ctx context.Context) time.Duration {
	if err := s.pass(ctx); err != nil && ctx.Err() == nil {
		s.log.WarnContext(ctx, "scheduler pass failed", "err", err)
		return s.cfg.PollInterval
	}
	qctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	d, ok, err := s.store.untilNext(qctx)
	if err != nil || !ok || d > s.cfg.PollInterval {
		return s.cfg.PollInterval
	}
	return max(d, 0)
}

func (s *Scheduler) pass(ctx context.Context) error {
	if err := s.takeOver(ctx); err != nil {
		return err
	}
	for {
		qctx, cancel := context.WithTimeout(ctx, queryTimeout)
		ds, now, err := s.store.due(qctx, batch)
		cancel()
		if err != nil {
			return err
		}
		if len(ds) == 0 {
			break
		}
		for _, d := range ds {
			if err := s.fireDue(ctx, d, now); err != nil {
				return err
			}
		}
	}
	if time.Since(s.lastPrune) >= pruneEvery {
		s.lastPrune = time.Now()
		qctx, cancel := context.WithTimeout(ctx, queryTimeout)
		defer cancel()
		return s.store.prune(qctx, s.cfg.Retention)
	}
	return nil
}

// fireDue claims d's tick and posts it, or skips the ticks older than the misfire grace.
func (s *Scheduler) fireDue(ctx context.Context, d due, now time.Time) error {
	spec, err := ParseSpec(d.Cron, d.Timezone)
	if err != nil {
		// Stored schedules were parsed when written; a zone database without the zone is the one
		// way here. The schedule stops rather than firing at a wrong time.
		s.log.WarnContext(ctx, "schedule cannot be read; it stops", "schedule_id", d.ID, "err", err)
		qctx, cancel := context.WithTimeout(ctx, queryTimeout)
		defer cancel()
		_, err := s.store.skip(qctx, d, nil)
		return err
	}
	if oldest := now.Add(-s.cfg.MisfireGrace); d.tick.Before(oldest) {
		missed := 0
		for t := d.tick; !t.IsZero() && t.Before(oldest) && missed < 1_000_000; t = spec.Next(t) {
			missed++
		}
		qctx, cancel := context.WithTimeout(ctx, queryTimeout)
		defer cancel()
		ok, err := s.store.skip(qctx, d, d.next(spec, oldest.Add(-time.Nanosecond)))
		if ok {
			s.missed.Add(float64(missed))
			s.log.WarnContext(ctx, "schedule ticks missed", "schedule_id", d.ID, "ticks", missed, "oldest", d.tick)
		}
		return err
	}
	sessionID := d.SessionID
	if sessionID == "" {
		sessionID = TickSession(s.cfg.Region, d.Tenant, d.ID, d.tick)
	}
	qctx, cancel := context.WithTimeout(ctx, queryTimeout)
	f, ok, err := s.store.claim(qctx, d, d.next(spec, d.tick), sessionID, s.cfg.Owner, s.cfg.LeaseTTL)
	cancel()
	if err != nil || !ok {
		return err
	}
	return s.postFire(ctx, f)
}

// takeOver posts again the fires whose owner's lease ran out, or gives up those past the grace.
func (s *Scheduler) takeOver(ctx context.Context) error {
	qctx, cancel := context.WithTimeout(ctx, queryTimeout)
	fires, stale, err := s.store.reclaim(qctx, s.cfg.Owner, s.cfg.LeaseTTL, s.cfg.MisfireGrace, batch)
	cancel()
	if err != nil {
		return err
	}
	for i, f := range fires {
		if stale[i] {
			s.fires.WithLabelValues("missed").Inc()
			qctx, cancel := context.WithTimeout(ctx, queryTimeout)
			err := s.store.finish(qctx, f, "missed", "")
			cancel()
			if err != nil {
				return err
			}
			continue
		}
		s.takeovers.Inc()
		if err := s.postFire(ctx, f); err != nil {
			return err
		}
	}
	return nil
}

// postFire posts f's turn and records the answer; a post to retry stays pending for its lease.
func (s *Scheduler) postFire(ctx context.Context, f Fire) error {
	body, err := FireBody(f)
	if err != nil {
		return err
	}
	turnID, out, detail := s.post(ctx, f.Tenant, f.SessionID, IdempotencyKey(f.ScheduleID, f.Tick), body)
	var outcome string
	switch out {
	case Posted:
		outcome = "posted"
		s.lateness.Observe(time.Since(f.Tick).Seconds())
	case Refused:
		outcome = "refused"
		s.log.WarnContext(ctx, "schedule tick refused", "schedule_id", f.ScheduleID, "tick", f.Tick, "detail", detail)
	default:
		s.fires.WithLabelValues("retry").Inc()
		s.log.InfoContext(ctx, "schedule tick not posted; it is retried after its lease", "schedule_id", f.ScheduleID, "tick", f.Tick, "detail", detail)
		return nil
	}
	s.fires.WithLabelValues(outcome).Inc()
	// The answer is recorded even when the pass is being stopped, so the tick is not posted again.
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), queryTimeout)
	defer cancel()
	return s.store.finish(qctx, f, outcome, turnID)
}

// sessionNamespace derives the sessions of schedules without one (UUIDv5).
var sessionNamespace = uuid.MustParse("3b8f7d1e-4c2a-5e6f-9a0b-1c2d3e4f5a6b")

// TickSession is the session a tick of a schedule without one posts to: new for each tick, and
// the same every time that tick is posted.
func TickSession(regionCode, tenant, scheduleID string, tick time.Time) string {
	return region.Prefix(regionCode, uuid.NewSHA1(sessionNamespace, []byte(tenant+"\x00"+scheduleID+"\x00"+tick.UTC().Format(time.RFC3339Nano))).String())
}

// IdempotencyKey is the key a tick is posted with: the same for every post of the tick, so
// intake maps them all to one turn.
func IdempotencyKey(scheduleID string, tick time.Time) string {
	return "schedule:" + scheduleID + ":" + tick.UTC().Format(time.RFC3339Nano)
}

// FireBody is the turn body a fire posts: the schedule's turn, its metadata naming the
// schedule and the tick. The same fire always gives the same bytes.
func FireBody(f Fire) ([]byte, error) {
	var turn map[string]json.RawMessage
	if err := json.Unmarshal(f.Turn, &turn); err != nil {
		return nil, fmt.Errorf("read schedule turn: %w", err)
	}
	md := map[string]any{}
	if raw, ok := turn["metadata"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &md); err != nil {
			return nil, fmt.Errorf("read schedule turn metadata: %w", err)
		}
	}
	md[MetadataKey] = map[string]string{"schedule_id": f.ScheduleID, "tick": f.Tick.UTC().Format(time.RFC3339Nano)}
	raw, err := json.Marshal(md)
	if err != nil {
		return nil, fmt.Errorf("encode fire metadata: %w", err)
	}
	turn["metadata"] = raw
	return json.Marshal(turn)
}

// OutcomeOf classifies an HTTP status of intake's answer to a post.
func OutcomeOf(status int) Outcome {
	switch {
	case status >= 200 && status < 300:
		return Posted
	case status == http.StatusTooManyRequests || status >= 500 || status == 0:
		return Retry
	default:
		return Refused
	}
}
