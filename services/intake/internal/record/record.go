package record

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnstile-run/turnstile/pkg/lifecycle"
)

// Row is one accepted turn.
type Row struct {
	TurnID     uuid.UUID
	SessionID  string
	Tenant     string
	AcceptedAt time.Time
	Deadline   time.Time
}

const (
	bufferSize = 8192
	maxBatch   = 500
)

// Recorder batches queued rows into Postgres.
type Recorder struct {
	pool     *pgxpool.Pool
	interval time.Duration
	log      *slog.Logger
	in       chan Row
	flushReq chan chan struct{}
	dropped  *prometheus.CounterVec
	written  prometheus.Counter

	loop lifecycle.Loop
}

// New returns a recorder; pool may be nil (every row is then dropped and counted).
func New(pool *pgxpool.Pool, interval time.Duration, log *slog.Logger, reg prometheus.Registerer) *Recorder {
	r := &Recorder{
		pool: pool, interval: interval, log: log,
		in: make(chan Row, bufferSize), flushReq: make(chan chan struct{}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "turnstile_intake_queued_rows_dropped_total",
			Help: "Queued rows of accepted turns not written to Postgres (the turn is still in Kafka), by reason.",
		}, []string{"reason"}),
		written: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "turnstile_intake_queued_rows_written_total",
			Help: "Queued rows of accepted turns written to Postgres (a turn whose row existed already is not counted).",
		}),
	}
	reg.MustRegister(r.dropped, r.written)
	return r
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

// Start runs the flush loop and returns at once.
func (r *Recorder) Start(ctx context.Context) error {
	r.loop.Start(ctx, r.run)
	return nil
}

// Stop flushes what is buffered and waits for the loop to end, or for ctx. Safe twice and before
// Start.
func (r *Recorder) Stop(ctx context.Context) error { return r.loop.Stop(ctx, "queued-row recorder") }

func (r *Recorder) run(ctx context.Context) {
	// The timer runs only while rows wait, so an idle replica does not wake up every interval.
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	armed := false
	batch := make([]Row, 0, maxBatch)
	drain := func() {
		for len(batch) < maxBatch && len(r.in) > 0 { // only this loop receives: it cannot block
			batch = append(batch, <-r.in)
		}
	}
	write := func() {
		r.write(ctx, batch)
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
			if len(batch) >= maxBatch {
				write()
			} else if !armed {
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

// insertSQL records sessions' tenants on first use and the turns as queued, in one statement.
const insertSQL = `
WITH rows AS (
    SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::timestamptz[], $5::timestamptz[])
        AS r(turn_id, session_id, tenant, accepted_at, deadline)
), s AS (
    INSERT INTO sessions (session_id, tenant)
    SELECT DISTINCT ON (session_id) session_id, tenant FROM rows ORDER BY session_id, accepted_at
    ON CONFLICT (session_id) DO NOTHING
)
INSERT INTO turns (turn_id, session_id, tenant, status, accepted_at, deadline)
SELECT DISTINCT ON (turn_id) turn_id, session_id, tenant, 'queued', accepted_at, deadline
FROM rows ORDER BY turn_id, accepted_at
ON CONFLICT (turn_id) DO NOTHING`

func (r *Recorder) write(ctx context.Context, batch []Row) {
	if r.pool == nil {
		r.dropped.WithLabelValues("no_database").Add(float64(len(batch)))
		return
	}
	n := len(batch)
	ids := make([]string, n)
	sessions := make([]string, n)
	tenants := make([]string, n)
	accepted := make([]time.Time, n)
	deadlines := make([]time.Time, n)
	for i, row := range batch {
		ids[i] = row.TurnID.String()
		sessions[i], tenants[i] = row.SessionID, row.Tenant
		accepted[i], deadlines[i] = row.AcceptedAt, row.Deadline
	}
	// Detached from the loop's cancellation: the last flush on shutdown runs after it.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	tag, err := r.insert(ctx, ids, sessions, tenants, accepted, deadlines)
	if err != nil {
		reason := "database_error"
		if errors.Is(err, context.DeadlineExceeded) {
			reason = "database_timeout"
		}
		r.dropped.WithLabelValues(reason).Add(float64(n))
		r.log.Warn("queued rows not recorded; the turns are in Kafka and their claim will record them",
			"rows", n, "err", err)
		return
	}
	r.written.Add(float64(tag.RowsAffected()))
}

// insert runs insertSQL in one round trip: a batch of two statements in one implicit transaction
// (one Sync), the first of which turns synchronous_commit off for it. The row is best-effort by
// design (the turn is durable in Kafka and its claim records it), and not waiting for the disk is
// what keeps these writes cheap; an explicit BEGIN/SET LOCAL/INSERT/COMMIT would cost four round
// trips per flush.
func (r *Recorder) insert(ctx context.Context, args ...any) (pgconn.CommandTag, error) {
	var b pgx.Batch
	b.Queue(`SELECT set_config('synchronous_commit', 'off', true)`)
	b.Queue(insertSQL, args...)
	res := r.pool.SendBatch(ctx, &b)
	defer func() { _ = res.Close() }()
	if _, err := res.Exec(); err != nil {
		return pgconn.CommandTag{}, fmt.Errorf("set synchronous_commit: %w", err)
	}
	tag, err := res.Exec()
	if err != nil {
		return pgconn.CommandTag{}, fmt.Errorf("insert queued rows: %w", err)
	}
	if err := res.Close(); err != nil {
		return pgconn.CommandTag{}, fmt.Errorf("commit queued rows: %w", err)
	}
	return tag, nil
}
