package record

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/lifecycle"
	"github.com/turnstile-run/turnstile/pkg/pgarray"
	"github.com/turnstile-run/turnstile/pkg/turnstore"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

// Row is one accepted turn.
type Row struct {
	TurnID uuid.UUID
	// ClientTurnID is the ID the client minted (TurnID is derived from it), or the zero UUID.
	ClientTurnID uuid.UUID
	Session      wire.SessionKey
	Tenant       string
	AcceptedAt   time.Time
	Deadline     time.Time
	// NeedSession asks for the session's row (its tenant) to be written with the turn's, unless it
	// exists. Intake leaves it unset: a session is its tenant's by its key (wire.SessionKey), and
	// its row is written with its first completion.
	NeedSession bool
	// What the turn's record holds beyond the above, so it can be produced again from the row:
	// the input's text, the metadata (encoded by the loop, off the request path), the multitask
	// strategy and the W3C traceparent (empty for none).
	Input       string
	Metadata    map[string]any
	Multitask   string
	Traceparent string
	// Webhook and PushConfigs are the record's (wire.Envelope's), stored with the row
	// (turnstore.Notifications), as is the task its metadata names.
	Webhook     *wire.Webhook
	PushConfigs []wire.PushConfig
	// Where Kafka put the record: partition, offset, and the topic's ID as intake knew it before
	// producing (the zero UUID when it did not).
	Partition int32
	Offset    int64
	TopicID   uuid.UUID
	// Agent is the agent the turn goes to (the record's envelope's).
	Agent string
	// Priority is the turn's priority (wire.Envelope.PriorityOf).
	Priority int

	// done, when set (Record), receives once the row's statement returned: whether it was
	// written (or existed already). Buffered, so the loop never waits on a caller gone.
	done chan bool
}

// Limits of a Recorder. BufferSize bounds the rows waiting for the loop (Add drops beyond it);
// MaxBatch bounds one statement, which is written at once when it fills.
const (
	BufferSize = 8192
	MaxBatch   = 500
	// WriteTimeout bounds one statement, so a stalled Postgres drops a batch rather than the loop.
	WriteTimeout = 2 * time.Second
)

// Recorder batches queued rows into Postgres.
type Recorder struct {
	// base is the pool the recorder was given; the loop writes through a pool of its own made from
	// base's configuration (openPool), closed when the loop ends.
	base     *pgxpool.Pool
	interval time.Duration
	log      *slog.Logger
	in       chan Row
	flushReq chan chan struct{}
	dropped  *prometheus.CounterVec
	written  prometheus.Counter
	waited   *prometheus.CounterVec
	// healthy is whether the last statement succeeded: Record waits only while it is, so a
	// Postgres outage costs a request at most one WriteTimeout, not every request one.
	healthy atomic.Bool

	loop lifecycle.Loop
}

// New returns a recorder that flushes at most interval after the first waiting row; a zero
// interval means config.QueueFlushIntervalDefault (TURNSTILE_QUEUE_FLUSH_INTERVAL's default). pool
// may be nil (every row is then dropped and counted).
func New(pool *pgxpool.Pool, interval time.Duration, log *slog.Logger, reg prometheus.Registerer) *Recorder {
	if interval <= 0 {
		interval = config.QueueFlushIntervalDefault
	}
	r := &Recorder{
		base: pool, interval: interval, log: log,
		in: make(chan Row, BufferSize), flushReq: make(chan chan struct{}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "turnstile_intake_queued_rows_dropped_total",
			Help: "Queued rows of accepted turns not written to Postgres (the turn is still in Kafka), by reason.",
		}, []string{"reason"}),
		written: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "turnstile_intake_queued_rows_written_total",
			Help: "Queued rows of accepted turns written to Postgres (a turn whose row existed already is not counted).",
		}),
	}
	r.waited = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "turnstile_intake_queued_rows_waited_total",
		Help: "Accepted turns whose answer waited for their queued row (installations of several agents), by result: written, dropped, timeout, or skipped (Postgres was failing).",
	}, []string{"result"})
	// Every reason has a series from the start, so a rate over it is 0 rather than absent.
	for _, reason := range []string{"buffer_full", "no_database", "database_error", "database_timeout"} {
		r.dropped.WithLabelValues(reason)
	}
	for _, result := range []string{WaitWritten, WaitDropped, WaitTimeout, WaitSkipped} {
		r.waited.WithLabelValues(result)
	}
	r.healthy.Store(pool != nil)
	reg.MustRegister(r.dropped, r.written, r.waited)
	return r
}

// Results of Record.
const (
	// WaitWritten: the row is in Postgres (written, or there already).
	WaitWritten = "written"
	// WaitDropped: the row's statement failed, or the buffer was full.
	WaitDropped = "dropped"
	// WaitTimeout: ctx ended first; the row may yet be written.
	WaitTimeout = "timeout"
	// WaitSkipped: the last statement had failed, so the row was added without waiting.
	WaitSkipped = "skipped"
)

// Record adds row and waits until its statement returned, or ctx ended, and says which (one of
// the Wait… results). A waiting row is written at once with whatever else waits (group commit,
// not the interval's timer). While Postgres fails (the last statement failed) it adds the row
// without waiting: intake keeps accepting at full speed through an outage (static stability).
//
// A turn whose answer waited for its row is visible to every claim that starts after the
// answer: a later turn of the session, posted after it and consumed by a lane of another agent,
// finds it in its claim's order check (pkg/turnstore, claim.sql).
func (r *Recorder) Record(ctx context.Context, row Row) string {
	if !r.healthy.Load() || r.loop.Done() == nil {
		r.Add(row)
		r.waited.WithLabelValues(WaitSkipped).Inc()
		return WaitSkipped
	}
	row.done = make(chan bool, 1)
	select {
	case r.in <- row:
	default:
		r.dropped.WithLabelValues("buffer_full").Inc()
		r.waited.WithLabelValues(WaitDropped).Inc()
		return WaitDropped
	}
	result := WaitTimeout
	select {
	case ok := <-row.done:
		result = WaitDropped
		if ok {
			result = WaitWritten
		}
	case <-ctx.Done():
	}
	r.waited.WithLabelValues(result).Inc()
	return result
}

// Add queues a row without blocking; when the buffer is full the row is dropped and counted.
func (r *Recorder) Add(row Row) {
	select {
	case r.in <- row:
	default:
		r.dropped.WithLabelValues("buffer_full").Inc()
	}
}

// Flush writes every row added before it and returns when they are written (or dropped), or when ctx
// ends. Before Start or after Stop it returns at once.
func (r *Recorder) Flush(ctx context.Context) {
	done := r.loop.Done()
	if done == nil {
		return
	}
	ack := make(chan struct{})
	select {
	case r.flushReq <- ack:
	case <-done:
		return
	case <-ctx.Done():
		return
	}
	select {
	case <-ack:
	case <-ctx.Done():
	}
}

// Start runs the flush loop and returns at once. The loop writes through a connection of its own
// (opened on first use) whose session has synchronous_commit off (see the package doc).
func (r *Recorder) Start(ctx context.Context) error {
	r.loop.Start(ctx, r.run)
	return nil
}

// openPool makes the loop's own one-connection pool from the given pool's configuration, with
// synchronous_commit off for its sessions; nil without a pool. The given pool keeps its settings:
// Config returns a deep copy.
func (r *Recorder) openPool(ctx context.Context) *pgxpool.Pool {
	if r.base == nil {
		return nil
	}
	cfg := r.base.Config()
	if cfg.ConnConfig.RuntimeParams == nil {
		cfg.ConnConfig.RuntimeParams = map[string]string{}
	}
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	cfg.MinConns, cfg.MaxConns = 0, 1 // one loop, one statement at a time
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		r.log.Error("queued-row recorder pool not created; rows will be dropped", "err", err)
		return nil
	}
	return pool
}

// Stop flushes what is buffered and waits for the loop to end, or for ctx. Safe twice and before
// Start.
func (r *Recorder) Stop(ctx context.Context) error { return r.loop.Stop(ctx, "queued-row recorder") }

func (r *Recorder) run(ctx context.Context) {
	pool := r.openPool(ctx)
	var db *turnstore.Store
	if pool != nil {
		defer pool.Close()
		db = turnstore.New(pool)
	}
	// The timer runs only while rows wait, so an idle replica does not wake up every interval.
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	armed := false
	batch := make([]Row, 0, MaxBatch)
	drain := func() {
		for len(batch) < MaxBatch && len(r.in) > 0 { // only this loop receives: it cannot block
			batch = append(batch, <-r.in)
		}
	}
	write := func() {
		r.write(ctx, db, batch)
		batch = batch[:0]
		if armed {
			timer.Stop()
			armed = false
		}
	}
	flushAll := func() {
		for {
			drain()
			if len(batch) == 0 {
				return
			}
			write()
		}
	}
	for {
		select {
		case <-ctx.Done():
			flushAll() // rows of turns Kafka acknowledged before shutdown
			return
		case ack := <-r.flushReq:
			flushAll()
			close(ack)
		case row := <-r.in:
			batch = append(batch, row)
			switch {
			case row.done != nil:
				// Someone waits: write now, with what else is waiting (group commit).
				drain()
				write()
			case len(batch) >= MaxBatch:
				write()
			case !armed:
				timer.Reset(r.interval)
				armed = true
			}
		case <-timer.C:
			armed = false
			drain()
			if len(batch) > 0 {
				write()
			}
		}
	}
}

func (r *Recorder) write(ctx context.Context, db *turnstore.Store, batch []Row) {
	ok := r.insert(ctx, db, batch)
	r.healthy.Store(ok)
	for _, row := range batch {
		if row.done != nil {
			row.done <- ok
		}
	}
}

// insert writes batch in one statement and says whether it succeeded.
func (r *Recorder) insert(ctx context.Context, db *turnstore.Store, batch []Row) bool {
	if db == nil {
		r.dropped.WithLabelValues("no_database").Add(float64(len(batch)))
		return false
	}
	n := len(batch)
	// As pgarray's arrays: a uuid.UUID would be encoded through its text form, and a plain slice's
	// elements each copied to the heap.
	p := turnstore.QueuedParams{
		TurnIDs: make(pgarray.UUIDs, n), SessionKeys: make(pgarray.Texts, n), Tenants: make(pgarray.Texts, n),
		AcceptedAt: make(pgarray.Times, n), Deadlines: make(pgarray.Times, n), NeedSession: make(pgarray.Bools, n),
		ClientTurnIDs: make([]*uuid.UUID, n),
		Inputs:        make(pgarray.Texts, n), Metadata: make([][]byte, n), Multitasks: make([]*string, n),
		Traceparents: make([]*string, n), Partitions: make(pgarray.Ints, n), Offsets: make(pgarray.Ints, n),
		TopicIDs: make([]*uuid.UUID, n), Agents: make(pgarray.Texts, n), Priorities: make(pgarray.Ints, n),
	}
	for i, row := range batch {
		p.Inputs[i], p.Partitions[i], p.Offsets[i] = pgarray.Text(row.Input), pgarray.Int(row.Partition), pgarray.Int(row.Offset)
		if row.Metadata != nil {
			// Intake checked that the metadata encodes (it is in the record): an error here
			// cannot happen, and would only leave the row without it.
			p.Metadata[i], _ = json.Marshal(row.Metadata)
		}
		if row.Multitask != "" {
			p.Multitasks[i] = &batch[i].Multitask
		}
		if row.Traceparent != "" {
			p.Traceparents[i] = &batch[i].Traceparent
		}
		if row.TopicID != uuid.Nil {
			p.TopicIDs[i] = &batch[i].TopicID
		}
		p.TurnIDs[i], p.Agents[i], p.Priorities[i] = pgarray.UUID(row.TurnID), pgarray.Text(row.Agent), pgarray.Int(row.Priority)
		p.SessionKeys[i], p.Tenants[i] = pgarray.Text(row.Session.String()), pgarray.Text(row.Tenant)
		p.AcceptedAt[i], p.Deadlines[i] = pgarray.Time(row.AcceptedAt), pgarray.Time(row.Deadline)
		p.NeedSession[i] = pgarray.Bool(row.NeedSession)
		if row.ClientTurnID != uuid.Nil {
			p.ClientTurnIDs[i] = &batch[i].ClientTurnID
		}
		p.Notifications.Add(i, row.Webhook, row.PushConfigs, turnstore.TaskOf(row.Metadata), n)
	}
	// Detached from the loop's cancellation: the last flush on shutdown runs after it. One
	// statement, one round trip, one implicit transaction.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), WriteTimeout)
	defer cancel()
	written, err := db.InsertQueued(ctx, &p)
	if err != nil {
		reason := "database_error"
		if errors.Is(err, context.DeadlineExceeded) {
			reason = "database_timeout"
		}
		r.dropped.WithLabelValues(reason).Add(float64(n))
		r.log.Warn("queued rows not recorded; the turns are in Kafka and their claim will record them",
			"rows", n, "err", err)
		return false
	}
	r.written.Add(float64(written))
	return true
}
