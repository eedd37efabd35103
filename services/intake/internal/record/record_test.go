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

	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/postgres"
	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).backgroundHealthCheck"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).reaper"),
	)
}

func row(session string) Row {
	return Row{TurnID: uuid.New(), Session: wire.NewSessionKey("acme", session), Tenant: "acme", AcceptedAt: time.Now(), Deadline: time.Now().Add(time.Minute)}
}

func TestRecorderDefaults(t *testing.T) {
	t.Parallel()
	r := New(nil, 0, nil, prometheus.NewRegistry())
	require.Equal(t, config.QueueFlushIntervalDefault, r.interval, "a zero interval is the setting's default")
	require.Equal(t, BufferSize, cap(r.in))
	r = New(nil, time.Second, nil, prometheus.NewRegistry())
	require.Equal(t, time.Second, r.interval)
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
			VALUES ($1, 'acme/s-a', 'acme', 'running', 1, now())`, running.TurnID)
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
			count(*) FILTER (WHERE status = 'running') FROM turns WHERE session_id = 'acme/s-a'`).Scan(&queued, &run))
		require.Equal(t, 700, queued)
		require.Equal(t, 1, run, "a claimed turn is never set back to queued")
		var tenant string
		require.NoError(t, env.Pool.QueryRow(ctx, `SELECT tenant FROM sessions WHERE session_id = 'acme/s-a'`).Scan(&tenant))
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
		require.NoError(t, env.Pool.QueryRow(ctx, `SELECT count(*) FROM turns WHERE session_id = 'acme/s-owner'`).Scan(&n))
		require.Equal(t, 1, n)
		require.NoError(t, env.Pool.QueryRow(ctx, `SELECT count(*) FROM sessions WHERE session_id = 'acme/s-owner'`).Scan(&n))
		require.Zero(t, n, "intake recorded the owner before accepting; the row does not do it again")
	})

	t.Run("OwnSessionWithoutWaitingForTheDisk", func(t *testing.T) {
		r := New(env.Pool, time.Millisecond, env.Log, prometheus.NewRegistry())
		pool := r.openPool(ctx) // the pool the loop writes through
		require.NotNil(t, pool)
		defer pool.Close()
		var setting string
		require.NoError(t, pool.QueryRow(ctx, `SHOW synchronous_commit`).Scan(&setting))
		require.Equal(t, "off", setting)
		require.NoError(t, env.Pool.QueryRow(ctx, `SHOW synchronous_commit`).Scan(&setting))
		require.Equal(t, "on", setting, "the pool it was given is left as it was")
	})

	t.Run("PostgresDownDropsAndCounts", func(t *testing.T) {
		dead, err := postgres.NewLazyPool(ctx, "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=1", postgres.Options{})
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

	t.Run("RecordWaitsForTheRow", func(t *testing.T) {
		// An hour's interval: only a waiting row's own write can put it in Postgres before Record
		// returns.
		r := New(env.Pool, time.Hour, env.Log, prometheus.NewRegistry())
		require.NoError(t, r.Start(ctx))
		defer func() { require.NoError(t, r.Stop(ctx)) }()
		before := row("s-wait")
		r.Add(before)
		rw := row("s-wait")
		require.Equal(t, WaitWritten, r.Record(ctx, rw))
		var n int
		require.NoError(t, env.Pool.QueryRow(ctx, `SELECT count(*) FROM turns WHERE turn_id = ANY($1)`,
			[]uuid.UUID{before.TurnID, rw.TurnID}).Scan(&n))
		require.Equal(t, 2, n, "the waiting row and the rows buffered before it are written")
		require.EqualValues(t, 1, testutil.ToFloat64(r.waited.WithLabelValues(WaitWritten)))
	})

	t.Run("RecordDoesNotWaitOnAFailingPostgres", func(t *testing.T) {
		dead, err := postgres.NewLazyPool(ctx, "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=1", postgres.Options{})
		require.NoError(t, err)
		defer dead.Close()
		r := New(dead, time.Millisecond, env.Log, prometheus.NewRegistry())
		require.NoError(t, r.Start(ctx))
		defer func() { require.NoError(t, r.Stop(ctx)) }()
		require.Equal(t, WaitDropped, r.Record(ctx, row("s-d")), "the first wait learns of the outage")
		require.Equal(t, WaitSkipped, r.Record(ctx, row("s-d")), "later ones do not wait for it")
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
		require.NoError(t, env.Pool.QueryRow(ctx, `SELECT count(*) FROM turns WHERE session_id = 'acme/s-c'`).Scan(&n))
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
