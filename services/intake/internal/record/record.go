package record

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
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
	// RequestHash identifies the request of a turn posted with an idempotency key (nil without one):
	// the first row written for a turn keeps its hash, and later requests compare theirs with it.
	RequestHash []byte
	// NeedSession asks for the session's owner to be recorded with the row: intake could not record
	// it before accepting the turn (Postgres did not answer then).
	NeedSession bool
}

// Recorded is a turn's row as Postgres holds it after Record: written by this request, by an
// earlier or concurrent request with the same idempotency key, or by a worker's claim.
type Recorded struct {
	// RequestHash is the hash of the request that wrote the row (nil when a row was created
	// without one, by a cancel for example).
	RequestHash []byte
	AcceptedAt  time.Time
}

// ErrNotRecorded is returned by Record when the row could not be written or read back.
var ErrNotRecorded = errors.New("queued row not recorded")

// pending is a row in the loop's buffer; done is set for a row whose caller waits (Record).
type pending struct {
	row  Row
	done chan recordResult
}

type recordResult struct {
	rec Recorded
	err error
}

const (
	bufferSize = 8192
	maxBatch   = 500
)

// Recorder batches queued rows into Postgres.
type Recorder struct {
	// base is the pool the recorder was given; pool is its own, made from base's configuration at
	// Start with synchronous_commit off for the session, and closed when the loop ends.
	base     *pgxpool.Pool
	pool     *pgxpool.Pool
	interval time.Duration
	log      *slog.Logger
	in       chan pending
	flushReq chan chan struct{}
	dropped  *prometheus.CounterVec
	written  prometheus.Counter

	loop lifecycle.Loop
}

// New returns a recorder; pool may be nil (every row is then dropped and counted).
func New(pool *pgxpool.Pool, interval time.Duration, log *slog.Logger, reg prometheus.Registerer) *Recorder {
	r := &Recorder{
		base: pool, interval: interval, log: log,
		in: make(chan pending, bufferSize), flushReq: make(chan chan struct{}),
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
	case r.in <- pending{row: row}:
	default:
		r.dropped.WithLabelValues("buffer_full").Inc()
	}
}

// Record writes the row and returns the turn's row as Postgres then holds it. The row goes in the
// next batch, which is sent at once (group commit: while one batch is in flight the next gathers
// what arrives). It returns ErrNotRecorded, without waiting, when the buffer is full or the
// recorder is not running, and when the write fails; ctx bounds the wait.
func (r *Recorder) Record(ctx context.Context, row Row) (Recorded, error) {
	done := r.loop.Done()
	if done == nil {
		return Recorded{}, fmt.Errorf("%w: the recorder is not running", ErrNotRecorded)
	}
	p := pending{row: row, done: make(chan recordResult, 1)}
	select {
	case r.in <- p:
	default:
		r.dropped.WithLabelValues("buffer_full").Inc()
		return Recorded{}, fmt.Errorf("%w: the buffer is full", ErrNotRecorded)
	}
	select {
	case res := <-p.done:
		return res.rec, res.err
	case <-done:
		// The loop wrote every buffered row before it ended; the answer is there unless the
		// row arrived after its last drain.
		select {
		case res := <-p.done:
			return res.rec, res.err
		default:
			return Recorded{}, fmt.Errorf("%w: the recorder stopped", ErrNotRecorded)
		}
	case <-ctx.Done():
		return Recorded{}, fmt.Errorf("%w: %w", ErrNotRecorded, context.Cause(ctx))
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
// (opened on first use) whose session has synchronous_commit off: the row is best-effort by design
// (the turn is durable in Kafka and its claim records it), and not waiting for the WAL flush is what
// keeps these writes cheap. A session setting instead of a SET LOCAL in every transaction saves a
// statement per batch, which the benchmark showed as a fifth of Postgres's cost per row in the
// small batches a few waiting requests make.
func (r *Recorder) Start(ctx context.Context) error {
	if r.loop.Done() != nil {
		select {
		case <-r.loop.Done():
		default:
			return nil // running
		}
	}
	if r.base != nil {
		cfg := r.base.Config()
		cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
		cfg.MinConns, cfg.MaxConns = 0, 1 // one loop, one statement at a time
		own, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			return fmt.Errorf("queued-row recorder pool: %w", err)
		}
		r.pool = own
	}
	r.loop.Start(ctx, func(ctx context.Context) {
		r.run(ctx)
		if r.pool != nil {
			r.pool.Close()
		}
	})
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
	batch := make([]pending, 0, maxBatch)
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
		case p := <-r.in:
			batch = append(batch, p)
			switch {
			case p.done != nil:
				// A caller waits: take what else is buffered and write now.
				drain()
				write()
			case len(batch) >= maxBatch:
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

// The insert takes the rows as arrays. DISTINCT ON keeps one row per turn (the earliest) when
// retries of one keyed request arrive in the same batch; ON CONFLICT DO NOTHING keeps whatever row
// the turn has already (written by an earlier request, a worker's claim or a cancel: a queued row
// never overwrites progress). It returns the number of rows it wrote and, with it, the rows it
// wrote for keyed requests (at least one row, with a NULL turn_id when there were none).
const (
	rowsCTE = `
WITH rows AS (
    SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::timestamptz[], $5::timestamptz[],
        $6::bytea[], $7::boolean[]) AS r(turn_id, session_id, tenant, accepted_at, deadline, request_hash, need_session)
)`
	insertTurns = `, ins AS (
    INSERT INTO turns (turn_id, session_id, tenant, status, accepted_at, deadline, request_hash)
    SELECT DISTINCT ON (turn_id) turn_id, session_id, tenant, 'queued', accepted_at, deadline, request_hash
    FROM rows ORDER BY turn_id, accepted_at
    ON CONFLICT (turn_id) DO NOTHING
    RETURNING turn_id, request_hash, accepted_at
)
SELECT n.written, i.turn_id, i.request_hash, i.accepted_at
FROM (SELECT count(*) AS written FROM ins) n LEFT JOIN ins i ON i.request_hash IS NOT NULL`
	// insertSQL is the usual statement: intake recorded every session's owner before accepting.
	insertSQL = rowsCTE + insertTurns
	// insertWithSessionsSQL also records the owners of sessions whose first turn was accepted while
	// Postgres did not answer intake's ownership check.
	insertWithSessionsSQL = rowsCTE + `, s AS (
    INSERT INTO sessions (session_id, tenant)
    SELECT DISTINCT ON (session_id) session_id, tenant FROM rows WHERE need_session
    ORDER BY session_id, accepted_at
    ON CONFLICT (session_id) DO NOTHING
)` + insertTurns
	// readRowsSQL reads back the rows of keyed turns that had a row already.
	readRowsSQL = `SELECT turn_id, request_hash, accepted_at FROM turns WHERE turn_id = ANY($1::uuid[])`
)

func (r *Recorder) write(ctx context.Context, batch []pending) {
	if r.pool == nil {
		r.dropped.WithLabelValues("no_database").Add(float64(len(batch)))
		answer(batch, nil, fmt.Errorf("%w: no database", ErrNotRecorded))
		return
	}
	n := len(batch)
	ids := make([][16]byte, n) // as arrays: uuid.UUID would be encoded through its text form
	sessions := make([]string, n)
	tenants := make([]string, n)
	accepted := make([]time.Time, n)
	deadlines := make([]time.Time, n)
	hashes := make([][]byte, n)
	needSession := make([]bool, n)
	sql := insertSQL
	for i, p := range batch {
		row := p.row
		ids[i] = row.TurnID
		sessions[i], tenants[i] = row.SessionID, row.Tenant
		accepted[i], deadlines[i] = row.AcceptedAt, row.Deadline
		hashes[i], needSession[i] = row.RequestHash, row.NeedSession
		if row.NeedSession {
			sql = insertWithSessionsSQL
		}
	}
	// Detached from the loop's cancellation: the last flush on shutdown runs after it.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	got, err := r.insert(ctx, sql, ids, sessions, tenants, accepted, deadlines, hashes, needSession)
	if err == nil {
		r.written.Add(float64(got.written))
		err = r.readBack(ctx, batch, got)
	}
	if err != nil {
		reason := "database_error"
		if errors.Is(err, context.DeadlineExceeded) {
			reason = "database_timeout"
		}
		r.dropped.WithLabelValues(reason).Add(float64(n))
		r.log.Warn("queued rows not recorded; the turns are in Kafka and their claim will record them",
			"rows", n, "err", err)
		answer(batch, nil, fmt.Errorf("%w: %w", ErrNotRecorded, err))
		return
	}
	answer(batch, got.rows, nil)
}

// insertResult is what a batch's insert returned: the number of rows written, and the keyed rows.
type insertResult struct {
	written int64
	rows    map[uuid.UUID]Recorded
}

// readBack reads the rows of waiting callers whose turn had a row already (the insert returns only
// the rows it wrote): one more round trip, only when a keyed request was retried.
func (r *Recorder) readBack(ctx context.Context, batch []pending, got insertResult) error {
	var missing []uuid.UUID
	for _, p := range batch {
		if p.done == nil {
			continue
		}
		if _, ok := got.rows[p.row.TurnID]; !ok {
			missing = append(missing, p.row.TurnID)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	rows, err := r.pool.Query(ctx, readRowsSQL, missing)
	if err != nil {
		return fmt.Errorf("read back queued rows: %w", err)
	}
	return scanRecorded(rows, got.rows)
}

func scanRecorded(rows pgx.Rows, into map[uuid.UUID]Recorded) error {
	defer rows.Close()
	for rows.Next() {
		var id uuid.UUID
		var rec Recorded
		if err := rows.Scan(&id, &rec.RequestHash, &rec.AcceptedAt); err != nil {
			return fmt.Errorf("scan queued row: %w", err)
		}
		into[id] = rec
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read queued rows: %w", err)
	}
	return nil
}

// answer gives every waiting caller its turn's row, or err.
func answer(batch []pending, rows map[uuid.UUID]Recorded, err error) {
	for _, p := range batch {
		if p.done == nil {
			continue
		}
		if err != nil {
			p.done <- recordResult{err: err}
			continue
		}
		rec, ok := rows[p.row.TurnID]
		if !ok {
			p.done <- recordResult{err: fmt.Errorf("%w: the turn's row is gone", ErrNotRecorded)}
			continue
		}
		p.done <- recordResult{rec: rec}
	}
}

// insert runs the insert: one statement, one round trip, one implicit transaction.
func (r *Recorder) insert(ctx context.Context, sql string, args ...any) (insertResult, error) {
	rows, err := r.pool.Query(ctx, sql, args...)
	if err != nil {
		return insertResult{}, fmt.Errorf("insert queued rows: %w", err)
	}
	got := insertResult{rows: map[uuid.UUID]Recorded{}}
	for rows.Next() {
		var id *uuid.UUID
		var rec Recorded
		var ts *time.Time
		if err := rows.Scan(&got.written, &id, &rec.RequestHash, &ts); err != nil {
			rows.Close()
			return insertResult{}, fmt.Errorf("scan queued rows: %w", err)
		}
		if id != nil && ts != nil {
			rec.AcceptedAt = *ts
			got.rows[*id] = rec
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return insertResult{}, fmt.Errorf("insert queued rows: %w", err)
	}
	return got, nil
}
