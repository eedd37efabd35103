package peer

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/turnstile-run/turnstile/loadtest/internal/stack"
	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/kafka"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

// Result is one side's measurement.
type Result struct {
	System  string  `json:"system"`
	Jobs    int     `json:"jobs"`
	Seconds float64 `json:"seconds_10_to_90_pct"`
	PerSec  float64 `json:"per_sec"`
	Total   float64 `json:"seconds_total"`
	// CPU is what the jobs between 10% and 90% cost each, in CPU time (see CPUPerJob).
	CPU CPUPerJob `json:"cpu_per_job"`
	// MeanBatch is turnstile's mean requests per group-commit batch over the run, by kind (claim,
	// complete, publish): how many turns shared one statement or one Redis pipeline, which is what
	// spreads each round trip's fixed cost. Empty for the other sides.
	MeanBatch map[string]float64 `json:"mean_batch,omitempty"`
	Notes     string             `json:"notes"`
}

// Comparison is both sides and their ratio, and the floor (see Floor) with its ratios to each.
type Comparison struct {
	Turnstile Result  `json:"turnstile"`
	River     Result  `json:"river"`
	Ratio     float64 `json:"turnstile_over_river"`
	Floor     Result  `json:"floor"`
	// TurnstileOverFloor is what turnstile's own work costs beyond the floor's (as a rate ratio);
	// FloorOverRiver is the most any pipeline of turnstile's shape could reach against River here.
	TurnstileOverFloor float64 `json:"turnstile_over_floor"`
	FloorOverRiver     float64 `json:"floor_over_river"`
}

// Options tune Run.
type Options struct {
	Jobs int
	// Sessions spreads turnstile's turns over this many sessions. Defaults to Jobs (one turn each).
	Sessions     int
	RiverWorkers int
	// RecordQueued also writes turnstile's turns to Postgres before its drain as intake does (the
	// session's owner and the turn as queued), so each claim takes over an existing row, as in
	// production, instead of inserting it. Off, the claim inserts the row: the cheaper path, taken in
	// production only when intake could not record the turn.
	RecordQueued bool
	Base         config.Config
	Log          *slog.Logger
}

// Run measures turnstile, then River, then the floor.
func Run(ctx context.Context, o Options) (Comparison, error) {
	if o.Sessions == 0 {
		o.Sessions = o.Jobs
	}
	if o.RiverWorkers == 0 {
		o.RiverWorkers = 1000
	}
	var c Comparison
	ts, err := Turnstile(ctx, o)
	if err != nil {
		return c, fmt.Errorf("turnstile side: %w", err)
	}
	c.Turnstile = ts
	rv, err := River(ctx, o)
	if err != nil {
		return c, fmt.Errorf("river side: %w", err)
	}
	c.River = rv
	fl, err := Floor(ctx, o)
	if err != nil {
		return c, fmt.Errorf("floor side: %w", err)
	}
	c.Floor = fl
	if rv.PerSec > 0 {
		c.Ratio, c.FloorOverRiver = ts.PerSec/rv.PerSec, fl.PerSec/rv.PerSec
	}
	if fl.PerSec > 0 {
		c.TurnstileOverFloor = ts.PerSec / fl.PerSec
	}
	return c, nil
}

// pollEvery is how often drain reads the count of finished jobs. The count is each side's own
// in-process signal (River's completion events, turnstile's worker counter), not a Postgres
// query: polled every 50 ms, that count(*) was a sequential scan of 10-60 ms of Postgres CPU
// mid-run, charged to the system measured. A poll still costs turnstile's side a registry read
// (about 50 µs), and every cpuEvery the CPU reading. 10 ms puts
// some 20 polls inside River's 10%-90% window when it drains 10,000 jobs in about 0.3 s, and the
// crossings are interpolated between polls.
const pollEvery = 10 * time.Millisecond

// cpuEvery is how often drain reads the CPU times (cpuReader), at the poll due after it. Read at
// every poll, they cost the generator's process 0.4-0.6 ms each here (a listing of /proc and a
// stat file per Postgres backend), 7% of turnstile's process CPU in a profile of the drain, charged
// to the side measured and more per job to the slower side. CPU time grows steadily while a side
// drains, so the times at a crossing are interpolated between the readings around it as well as
// between polls: the reading's precision is the kernel's 10 ms tick either way.
const cpuEvery = 50 * time.Millisecond

// cpuSample is the CPU times read at a moment.
type cpuSample struct {
	at  time.Time
	cpu cpuTimes
}

// cpuAt is the CPU times at t, interpolated linearly between the samples around it (sorted by
// time); the first or the last sample's outside them.
func cpuAt(samples []cpuSample, t time.Time) cpuTimes {
	for i := 1; i < len(samples); i++ {
		a, b := samples[i-1], samples[i]
		if t.After(b.at) {
			continue
		}
		if !t.After(a.at) {
			return a.cpu
		}
		return between(a.cpu, b.cpu, float64(t.Sub(a.at))/float64(b.at.Sub(a.at)))
	}
	return samples[len(samples)-1].cpu
}

// drained is what drain measured.
type drained struct {
	seconds float64 // between 10% and 90% of the jobs finished
	total   float64 // from began to the last job
	cpu     CPUPerJob
}

// drain polls count until it reaches n, then asks confirm once how many jobs Postgres holds as
// finished and fails unless that is n too: count is an in-process signal, and a signal that
// over-reported would time a drain that had not happened. The moments the count crossed 10% and
// 90% of n are interpolated linearly between the two polls around each, and the CPU times at those
// moments between the readings around them (cpuEvery), so the CPU per job covers the same jobs as
// the rate.
func drain(ctx context.Context, n int, began time.Time, count, confirm func(context.Context) (int, error)) (drained, error) {
	var t10, t90 time.Time
	lo, hi := n/10, n-n/10
	cpus := newCPUReader()
	samples := []cpuSample{{began, cpus.read()}}
	prevK, prevAt := 0, began
	for {
		k, err := count(ctx)
		if err != nil {
			return drained{}, err
		}
		now := time.Now()
		if t10.IsZero() && k >= lo {
			t10 = at(prevAt, now, fraction(lo, prevK, k))
		}
		if t90.IsZero() && k >= hi {
			t90 = at(prevAt, now, fraction(hi, prevK, k))
		}
		if k >= n || now.Sub(samples[len(samples)-1].at) >= cpuEvery {
			samples = append(samples, cpuSample{now, cpus.read()})
		}
		if k >= n {
			d := drained{
				seconds: t90.Sub(t10).Seconds(), total: now.Sub(began).Seconds(),
				cpu: perJob(cpuAt(samples, t10), cpuAt(samples, t90), float64(hi-lo)),
			}
			return d, confirmed(ctx, n, k, confirm)
		}
		prevK, prevAt = k, now
		select {
		case <-ctx.Done():
			return drained{}, fmt.Errorf("%d of %d done: %w", k, n, ctx.Err())
		case <-time.After(pollEvery):
		}
	}
}

// confirmed checks, once, that Postgres holds n finished jobs when the in-process count said k.
func confirmed(ctx context.Context, n, k int, confirm func(context.Context) (int, error)) error {
	got, err := confirm(ctx)
	if err != nil {
		return fmt.Errorf("confirm the %d finished jobs in postgres: %w", n, err)
	}
	if got != n {
		return fmt.Errorf("the in-process count said %d of %d jobs finished, postgres holds %d", k, n, got)
	}
	return nil
}

// result is a side's Result from its drain: the rate is the 80% of the jobs between the 10% and
// 90% crossings over the time between them.
func (d drained) result(system string, jobs int, notes string) Result {
	return Result{
		System: system, Jobs: jobs, Seconds: d.seconds, PerSec: 0.8 * float64(jobs) / d.seconds, Total: d.total,
		CPU: d.cpu, Notes: notes,
	}
}

// countRows is a confirm func for drain: the count(*) query q on pool.
func countRows(pool *pgxpool.Pool, q string) func(context.Context) (int, error) {
	return func(ctx context.Context) (int, error) {
		var n int
		err := pool.QueryRow(ctx, q).Scan(&n)
		return n, err
	}
}

// fraction is how far between two polls a count that was k0 at the first and k1 at the second
// reached target (k0 < target <= k1), assuming it grew linearly in between; 1 (the later poll) when
// it did not grow.
func fraction(target, k0, k1 int) float64 {
	if k1 <= k0 {
		return 1
	}
	return float64(target-k0) / float64(k1-k0)
}

// at is the moment a fraction frac of the way from t0 to t1.
func at(t0, t1 time.Time, frac float64) time.Time {
	return t0.Add(time.Duration(frac * float64(t1.Sub(t0))))
}

// Turnstile queues o.Jobs one-word demo turns in Kafka, then starts a worker and times the drain.
func Turnstile(ctx context.Context, o Options) (Result, error) {
	st, err := startFront(ctx, o, "peer")
	if err != nil {
		return Result{}, err
	}
	defer func() { _ = st.Stop(context.WithoutCancel(ctx), false) }()
	cfg := st.Config

	queuedAs := "straight into Kafka, no row until the claim inserts it"
	var record func([]wire.Envelope) error
	if o.RecordQueued {
		record = func(envs []wire.Envelope) error { return recordQueued(ctx, st.Pool, envs) }
		queuedAs = "into Kafka and as queued rows with their sessions' owners, as intake records them (-record-queued)"
	}
	if err := queueTurns(ctx, st.Config.BrokerList(), st.Config.Topic, o.Jobs, o.Sessions, record); err != nil {
		return Result{}, err
	}
	began := time.Now()
	if err := st.StartWorker(ctx, cfg.InstanceID+"-w"); err != nil {
		return Result{}, err
	}
	workers := st.WorkerMetrics()
	d, err := drain(ctx, o.Jobs, began, func(context.Context) (int, error) {
		return succeeded(workers)
	}, countRows(st.Pool, `SELECT count(*) FROM turns WHERE status = 'succeeded'`))
	if err != nil {
		return Result{}, err
	}
	batches, err := meanBatches(workers)
	if err != nil {
		return Result{}, err
	}
	r := d.result("turnstile", o.Jobs, fmt.Sprintf("one worker process, TURNSTILE_WORKER_MAX_INFLIGHT=%d, %d partitions, %d sessions, demo agent tokens=1 delay=0; turns queued %s; per turn: a claim, the completion transaction with its history append and two fenced publishes (turn.started with the one turn.delta as the agent returns, beside the completion; turn.completed after it), each batched with the other running turns' (one statement or one Redis pipeline per batch); finished turns counted from the worker's succeeded-attempts counter, confirmed once in Postgres",
		cfg.MaxInflight, cfg.Partitions, o.Sessions, queuedAs))
	r.MeanBatch = batches
	return r, nil
}

// startFront starts turnstile's intake and gateway in this process, with the demo agent at its
// cheapest (no delay), on a fresh schema and key prefix named after name, which its Stop removes.
// The worker is started on its own (stack.Stack.StartWorker).
func startFront(ctx context.Context, o Options, name string) (*stack.Stack, error) {
	cfg := o.Base
	id := strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	cfg.DatabaseSchema, cfg.KeyPrefix, cfg.InstanceID = "lt_"+name+"_"+id, "lt-"+name+"-"+id, "lt-"+name+"-"+id
	cfg.DemoDelay = 0
	return stack.Start(ctx, cfg, "intake,gateway", o.Log)
}

// turnEnvelopes is n one-word demo turns, the turns first..first+n-1 of a run that spreads its
// turns over sessions sessions, accepted at now.
func turnEnvelopes(first, n, sessions int, now time.Time) []wire.Envelope {
	envs := make([]wire.Envelope, n)
	for i := range envs {
		envs[i] = wire.Envelope{
			TurnID: uuid.Must(uuid.NewV7()), SessionID: "peer-" + strconv.Itoa((first+i)%sessions), Tenant: "default",
			Input: wire.Input{Text: "noop"}, Metadata: map[string]any{"demo": map[string]any{"tokens": 1}},
			Deadline: now.Add(time.Hour), AcceptedAt: now,
		}
	}
	return envs
}

// queueTurns produces jobs one-word demo turns (turnEnvelopes), spread over sessions sessions, to
// topic as intake would write them, a thousand at a time, and hands each thousand to record when it
// is not nil, after Kafka took them. The envelopes are made a thousand at a time too, so the drain
// measured next starts without a run's worth of them just discarded on the heap.
func queueTurns(ctx context.Context, brokers []string, topic string, jobs, sessions int, record func([]wire.Envelope) error) error {
	cl, err := kafka.NewClient(kafka.ProducerOpts(brokers)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	now := time.Now()
	recs := make([]*kgo.Record, 0, 1000)
	for first := 0; first < jobs; first += cap(recs) {
		envs := turnEnvelopes(first, min(cap(recs), jobs-first), sessions, now)
		recs = recs[:0]
		for _, env := range envs {
			v, err := env.Encode()
			if err != nil {
				return err
			}
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(env.SessionKey().String()), Value: v})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return fmt.Errorf("queue turns: %w", err)
		}
		if record != nil {
			if err := record(envs); err != nil {
				return err
			}
		}
	}
	return nil
}

// recordQueuedSQL writes what intake writes to Postgres for an accepted turn (its session's owner,
// and the turn as queued; services/intake's api and record packages), for many turns at once.
const recordQueuedSQL = `
WITH rows AS (
    SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::timestamptz[], $5::timestamptz[])
        AS r(turn_id, session_id, tenant, accepted_at, deadline)
), s AS (
    INSERT INTO sessions (session_id, tenant)
    SELECT DISTINCT ON (session_id) session_id, tenant FROM rows ORDER BY session_id
    ON CONFLICT (session_id) DO NOTHING
)
INSERT INTO turns (turn_id, session_id, tenant, status, accepted_at, deadline)
SELECT turn_id, session_id, tenant, 'queued', accepted_at, deadline FROM rows
ON CONFLICT (turn_id) DO NOTHING`

// recordQueued writes envs to Postgres as intake does before a worker claims them, in one
// statement (recordQueuedSQL); queueTurns hands it a thousand at a time.
func recordQueued(ctx context.Context, pool *pgxpool.Pool, envs []wire.Envelope) error {
	n := len(envs)
	ids := make([]uuid.UUID, n)
	sessions, tenants := make([]string, n), make([]string, n)
	accepted, deadlines := make([]time.Time, n), make([]time.Time, n)
	for i, e := range envs {
		ids[i], sessions[i], tenants[i], accepted[i], deadlines[i] = e.TurnID, e.SessionKey().String(), e.Tenant, e.AcceptedAt, e.Deadline
	}
	tag, err := pool.Exec(ctx, recordQueuedSQL, ids, sessions, tenants, accepted, deadlines)
	if err != nil {
		return fmt.Errorf("record queued turns: %w", err)
	}
	// Fresh turn IDs: every one is a new row, or the drain would not start from queued rows.
	if tag.RowsAffected() != int64(n) {
		return fmt.Errorf("record queued turns: %d of %d rows inserted", tag.RowsAffected(), n)
	}
	return nil
}

// attemptsMetric is the worker's counter of ended attempts, by outcome; it counts a succeeded
// attempt after the turn's completion committed and its turn.completed was published.
const attemptsMetric = "turnstile_worker_attempts_total"

// succeeded sums the succeeded attempts over the worker processes' registries (which hold the
// worker role's metrics only, so a read is cheap; see stack.Stack.WorkerMetrics).
func succeeded(workers []prometheus.Gatherer) (int, error) {
	var sum float64
	err := eachMetric(workers, attemptsMetric, func(m *dto.Metric) {
		if label(m, "outcome") == "succeeded" {
			sum += m.GetCounter().GetValue()
		}
	})
	return int(sum), err
}

// batchMetric is the worker's histogram of requests per group-commit batch, by kind.
const batchMetric = "turnstile_worker_batch_size"

// meanBatches is the mean batch size of each kind over the worker processes' registries.
func meanBatches(workers []prometheus.Gatherer) (map[string]float64, error) {
	sum, count := map[string]float64{}, map[string]uint64{}
	err := eachMetric(workers, batchMetric, func(m *dto.Metric) {
		if kind := label(m, "kind"); kind != "" {
			sum[kind] += m.GetHistogram().GetSampleSum()
			count[kind] += m.GetHistogram().GetSampleCount()
		}
	})
	if err != nil {
		return nil, err
	}
	out := make(map[string]float64, len(sum))
	for kind, n := range count {
		if n > 0 {
			out[kind] = sum[kind] / float64(n)
		}
	}
	return out, nil
}

// eachMetric calls f with every metric of the family name in the worker processes' registries.
func eachMetric(workers []prometheus.Gatherer, name string, f func(*dto.Metric)) error {
	for _, g := range workers {
		mfs, err := g.Gather()
		if err != nil {
			return fmt.Errorf("gather worker metrics: %w", err)
		}
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
			for _, m := range mf.GetMetric() {
				f(m)
			}
		}
	}
	return nil
}

// label is the value of the metric's label name, or "" without one.
func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

type noopArgs struct{}

func (noopArgs) Kind() string { return "lt_noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
}

func (noopWorker) Work(context.Context, *river.Job[noopArgs]) error { return nil }

// River queues o.Jobs no-op jobs in its own schema, then starts a client and times the drain.
func River(ctx context.Context, o Options) (Result, error) {
	schema := "lt_river_" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	pcfg, err := pgxpool.ParseConfig(o.Base.DatabaseURL)
	if err != nil {
		return Result{}, err
	}
	pcfg.MaxConns = 20
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return Result{}, err
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		return Result{}, err
	}
	defer func() {
		_, _ = pool.Exec(context.WithoutCancel(ctx), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	}()
	drv := riverpgxv5.New(pool)
	mig, err := rivermigrate.New(drv, &rivermigrate.Config{Schema: schema, Logger: o.Log})
	if err != nil {
		return Result{}, err
	}
	if _, err := mig.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return Result{}, fmt.Errorf("migrate river schema: %w", err)
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &noopWorker{})
	client, err := river.NewClient(drv, &river.Config{
		Schema:            schema,
		Logger:            o.Log,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: o.RiverWorkers}},
		Workers:           workers,
		FetchCooldown:     2 * time.Millisecond,
		FetchPollInterval: 20 * time.Millisecond,
	})
	if err != nil {
		return Result{}, err
	}
	// Subscribed before Start, so no completion goes by unseen.
	events, unsubscribe := client.SubscribeConfig(&river.SubscribeConfig{Kinds: []river.EventKind{river.EventKindJobCompleted}, ChanSize: o.Jobs})
	completed := countEvents(events)
	defer func() {
		unsubscribe()
		<-completed.done
	}()
	params := make([]river.InsertManyParams, 0, 1000)
	for i := range o.Jobs {
		params = append(params, river.InsertManyParams{Args: noopArgs{}})
		if len(params) == cap(params) || i == o.Jobs-1 {
			if _, err := client.InsertManyFast(ctx, params); err != nil {
				return Result{}, fmt.Errorf("insert river jobs: %w", err)
			}
			params = params[:0]
		}
	}
	began := time.Now()
	if err := client.Start(ctx); err != nil {
		return Result{}, err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = client.Stop(sctx)
	}()
	q := `SELECT count(*) FROM ` + pgx.Identifier{schema, "river_job"}.Sanitize() + ` WHERE state = 'completed'`
	d, err := drain(ctx, o.Jobs, began, func(context.Context) (int, error) {
		return int(completed.n.Load()), nil
	}, countRows(pool, q))
	if err != nil {
		return Result{}, err
	}
	return d.result("river", o.Jobs, fmt.Sprintf("river %s, riverpgxv5, MaxWorkers=%d, FetchCooldown=2ms, FetchPollInterval=20ms, own schema on the same Postgres; no per-session order, no event stream; finished jobs counted from the client's job-completed events, confirmed once in Postgres",
		"v0.51.2", o.RiverWorkers)), nil
}

// eventCount counts the events of a River subscription until its channel closes.
//
// What River v0.51.2's source says about them: the client's batch completer hands a batch's
// events to the subscription manager only after the UPDATEs that set the batch's states
// (autocommitted statements on the pool, 5,000 rows at most each) returned, and only for the rows
// they returned in a final state, as completed for those in state completed
// (internal/jobcompleter/job_completer.go, handleBatch and
// completerJobUpdatedFromStateAndReason); that hand-over blocks, so nothing is lost there. The
// manager then sends each event to each subscription's channel without blocking and drops it,
// with a warning in the log, when the channel is full (subscription_manager.go,
// distributeJobEvent, whose own TODO says the default size of 1,000 will drop events of batches
// of up to 5,000), a whole batch at a time. So the channel is made as big as the jobs queued,
// which no drop can then reach. A subscription made before Start sees every event, and its
// channel is closed by its unsubscribe func or when the client stops.
type eventCount struct {
	n    atomic.Int64
	done chan struct{} // closed when the channel closed and the count is final
}

func countEvents(events <-chan *river.Event) *eventCount {
	c := &eventCount{done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for range events {
			c.n.Add(1)
		}
	}()
	return c
}
