package record

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/turnstile-run/turnstile/pkg/postgres"
	"github.com/turnstile-run/turnstile/pkg/testenv"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).backgroundHealthCheck"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).reaper"),
	)
}

func row(session string) Row {
	return Row{TurnID: uuid.New(), SessionID: session, Tenant: "acme", AcceptedAt: time.Now(), Deadline: time.Now().Add(time.Minute)}
}

func TestRecorder(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 1})
	ctx := context.Background()

	t.Run("WritesBatchesAndKeepsProgress", func(t *testing.T) {
		r := New(env.Pool, time.Millisecond, env.Log, prometheus.NewRegistry())
		require.NoError(t, r.Start(ctx))
		defer func() { require.NoError(t, r.Stop(ctx)) }()
		running := row("s-a")
		_, err := env.Pool.Exec(ctx, `INSERT INTO turns (turn_id, session_id, tenant, status, attempt, accepted_at)
			VALUES ($1, 's-a', 'acme', 'running', 1, now())`, running.TurnID)
		require.NoError(t, err)
		rows := []Row{running}
		for i := range 700 { // more than one batch
			rw := row("s-a")
			rw.NeedSession = i == 600 // the owner check failed open for this one
			rows = append(rows, rw)
		}
		for _, rw := range rows {
			r.Add(rw)
		}
		r.Flush(ctx)
		var queued, run int
		require.NoError(t, env.Pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'queued'),
			count(*) FILTER (WHERE status = 'running') FROM turns WHERE session_id = 's-a'`).Scan(&queued, &run))
		require.Equal(t, 700, queued)
		require.Equal(t, 1, run, "a claimed turn is never set back to queued")
		var tenant string
		require.NoError(t, env.Pool.QueryRow(ctx, `SELECT tenant FROM sessions WHERE session_id = 's-a'`).Scan(&tenant))
		require.Equal(t, "acme", tenant, "a row whose owner check failed open records the session's owner")
		require.EqualValues(t, 700, testutil.ToFloat64(r.written))
	})

	t.Run("SessionOwnerOnlyWhenAsked", func(t *testing.T) {
		r := New(env.Pool, time.Millisecond, env.Log, prometheus.NewRegistry())
		require.NoError(t, r.Start(ctx))
		defer func() { require.NoError(t, r.Stop(ctx)) }()
		r.Add(row("s-owner"))
		r.Flush(ctx)
		var n int
		require.NoError(t, env.Pool.QueryRow(ctx, `SELECT count(*) FROM sessions WHERE session_id = 's-owner'`).Scan(&n))
		require.Zero(t, n, "intake recorded the owner before accepting; the row does not do it again")
	})

	t.Run("RecordReturnsTheTurnsRow", func(t *testing.T) {
		// A long interval: Record must not wait for the timer.
		r := New(env.Pool, time.Hour, env.Log, prometheus.NewRegistry())
		require.NoError(t, r.Start(ctx))
		defer func() { require.NoError(t, r.Stop(ctx)) }()

		first := row("s-key")
		first.RequestHash = []byte("hash-1")
		got, err := r.Record(ctx, first)
		require.NoError(t, err)
		require.Equal(t, []byte("hash-1"), got.RequestHash)
		require.WithinDuration(t, first.AcceptedAt, got.AcceptedAt, time.Microsecond)

		// A retry, later, with another body: the first request's row answers.
		retry := first
		retry.RequestHash, retry.AcceptedAt = []byte("hash-2"), time.Now().Add(time.Second)
		again, err := r.Record(ctx, retry)
		require.NoError(t, err)
		require.Equal(t, got, again)

		// Concurrent requests for one new turn, landing in one batch or several: every caller
		// gets the same row, written by one of them.
		id := uuid.New()
		results := make(chan Recorded, 8)
		errs := make(chan error, 8)
		for i := range 8 {
			go func() {
				rw := row("s-key")
				rw.TurnID, rw.RequestHash = id, []byte{byte(i)}
				rec, err := r.Record(ctx, rw)
				errs <- err
				results <- rec
			}()
		}
		var recs []Recorded
		for range 8 {
			require.NoError(t, <-errs)
			recs = append(recs, <-results)
		}
		for _, rec := range recs[1:] {
			require.Equal(t, recs[0], rec)
		}
		var stored []byte
		require.NoError(t, env.Pool.QueryRow(ctx, `SELECT request_hash FROM turns WHERE turn_id = $1`, id).Scan(&stored))
		require.Equal(t, recs[0].RequestHash, stored)

		// A worker's claim wrote the row first: its hash and accepted_at answer.
		claimed := row("s-key")
		claimed.RequestHash = []byte("from-intake")
		_, err = env.Pool.Exec(ctx, `INSERT INTO turns (turn_id, session_id, tenant, status, attempt, accepted_at, request_hash)
			VALUES ($1, 's-key', 'acme', 'running', 1, '2026-01-02T03:04:05.123456Z', 'from-record')`, claimed.TurnID)
		require.NoError(t, err)
		rec, err := r.Record(ctx, claimed)
		require.NoError(t, err)
		require.Equal(t, []byte("from-record"), rec.RequestHash)
		require.True(t, rec.AcceptedAt.Equal(time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)))
	})

	t.Run("RecordFailsFast", func(t *testing.T) {
		r := New(env.Pool, time.Hour, env.Log, prometheus.NewRegistry())
		_, err := r.Record(ctx, row("s-e"))
		require.ErrorIs(t, err, ErrNotRecorded, "before Start")

		dead, err := postgres.NewLazyPool(ctx, "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=1", "")
		require.NoError(t, err)
		defer dead.Close()
		down := New(dead, time.Hour, env.Log, prometheus.NewRegistry())
		require.NoError(t, down.Start(ctx))
		defer func() { require.NoError(t, down.Stop(ctx)) }()
		_, err = down.Record(ctx, row("s-e"))
		require.ErrorIs(t, err, ErrNotRecorded, "Postgres refuses connections")

		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		_, err = down.Record(cancelled, row("s-e"))
		require.ErrorIs(t, err, ErrNotRecorded)
	})

	t.Run("PostgresDownDropsAndCounts", func(t *testing.T) {
		dead, err := postgres.NewLazyPool(ctx, "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=1", "")
		require.NoError(t, err)
		defer dead.Close()
		r := New(dead, time.Millisecond, env.Log, prometheus.NewRegistry())
		require.NoError(t, r.Start(ctx))
		defer func() { require.NoError(t, r.Stop(ctx)) }()
		r.Add(row("s-b"))
		r.Add(row("s-b"))
		r.Flush(ctx)
		require.EqualValues(t, 2, testutil.ToFloat64(r.dropped.WithLabelValues("database_error")))
	})

	t.Run("StopFlushesAndIsSafeTwice", func(t *testing.T) {
		r := New(env.Pool, time.Hour, env.Log, prometheus.NewRegistry())
		require.NoError(t, r.Stop(ctx), "stop before start")
		r.Flush(ctx) // before start: returns at once
		require.NoError(t, r.Start(ctx))
		require.NoError(t, r.Start(ctx))
		r.Add(row("s-c"))
		require.NoError(t, r.Stop(ctx))
		require.NoError(t, r.Stop(ctx))
		var n int
		require.NoError(t, env.Pool.QueryRow(ctx, `SELECT count(*) FROM turns WHERE session_id = 's-c'`).Scan(&n))
		require.Equal(t, 1, n, "rows buffered at Stop are written")
	})

	t.Run("StartStopStress", func(t *testing.T) {
		for range 20 {
			r := New(env.Pool, time.Millisecond, env.Log, prometheus.NewRegistry())
			require.NoError(t, r.Start(ctx))
			r.Add(row("s-d"))
			require.NoError(t, r.Stop(ctx))
		}
	})
}
