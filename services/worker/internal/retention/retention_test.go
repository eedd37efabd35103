package retention

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/testenv"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).backgroundHealthCheck"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).reaper"),
	)
}

type bundle struct {
	env *testenv.Env
	mu  sync.Mutex
	// batches records the rows each delete statement removed.
	batches []int
	round   chan struct{}
}

func setup(t *testing.T, cfg Config) (*Cleaner, *bundle) {
	t.Helper()
	env := testenv.New(t, testenv.Options{Partitions: 1})
	b := &bundle{env: env, round: make(chan struct{}, 100)}
	cfg.OnBatch = func(n int, err error) {
		if err != nil {
			t.Errorf("retention batch: %v", err)
		}
		b.mu.Lock()
		b.batches = append(b.batches, n)
		b.mu.Unlock()
		if n < cfg.Batch {
			b.round <- struct{}{}
		}
	}
	return New(env.Pool, cfg, env.Log), b
}

// insert adds n turns with the given status finished (or, for live statuses, updated) age ago.
func (b *bundle) insert(t *testing.T, n int, status string, age time.Duration) {
	t.Helper()
	finished := "now() - $2 * interval '1 millisecond'"
	if status == "queued" || status == "running" {
		finished = "NULL"
	}
	_, err := b.env.Pool.Exec(context.Background(), `INSERT INTO turns (turn_id, session_id, tenant, status, accepted_at, finished_at)
		SELECT gen_random_uuid(), 's', 'default', $1, now() - $2 * interval '1 millisecond', `+finished+`
		FROM generate_series(1, $3)`, status, age.Milliseconds(), n)
	require.NoError(t, err)
}

func (b *bundle) count(t *testing.T, where string) int {
	t.Helper()
	var n int
	require.NoError(t, b.env.Pool.QueryRow(context.Background(), `SELECT count(*) FROM turns WHERE `+where).Scan(&n))
	return n
}

func TestCleaner(t *testing.T) {
	t.Parallel()

	t.Run("Defaults", func(t *testing.T) {
		t.Parallel()
		c := New(nil, Config{Retention: time.Hour}, nil)
		require.Equal(t, config.RetentionIntervalDefault, c.cfg.Interval)
		require.Equal(t, config.RetentionBatchDefault, c.cfg.Batch)
		require.Equal(t, time.Minute, c.cfg.Interval)
		require.Equal(t, 1000, c.cfg.Batch)
		require.Equal(t, config.LangGraphThreadTTLDefault, c.cfg.ThreadTTL)
		require.Equal(t, 7*24*time.Hour, c.cfg.ThreadTTL)
	})

	t.Run("DeletesExpiredFinishedRowsInBatches", func(t *testing.T) {
		t.Parallel()
		c, b := setup(t, Config{Retention: time.Hour, Interval: time.Hour, Batch: 100})
		b.insert(t, 250, "succeeded", 2*time.Hour)
		b.insert(t, 30, "failed", 3*time.Hour)
		b.insert(t, 20, "succeeded", 30*time.Minute) // finished, but within retention
		b.insert(t, 10, "running", 5*time.Hour)      // old but live
		b.insert(t, 10, "queued", 5*time.Hour)

		require.NoError(t, c.Start(context.Background()))
		<-b.round // the first round runs at once
		require.NoError(t, c.Stop(context.Background()))

		require.Zero(t, b.count(t, "finished_at < now() - interval '1 hour'"))
		require.Equal(t, 20, b.count(t, "status = 'succeeded'"))
		require.Equal(t, 20, b.count(t, "status IN ('queued', 'running')"))
		b.mu.Lock()
		defer b.mu.Unlock()
		require.Equal(t, []int{100, 100, 80}, b.batches, "280 expired rows go in batches of at most 100")
	})

	t.Run("DeletesSessionsWithoutTurns", func(t *testing.T) {
		t.Parallel()
		sessions := make(chan int, 10)
		c, b := setup(t, Config{
			Retention: time.Hour, Interval: time.Hour, Batch: 100,
			OnSessions: func(n int, err error) {
				if err != nil {
					t.Errorf("retention sessions: %v", err)
				}
				sessions <- n
			},
		})
		ctx := context.Background()
		_, err := b.env.Pool.Exec(ctx, `INSERT INTO sessions (session_id, tenant, created_at, updated_at) VALUES
			('expired', 'default', now() - interval '3 hours', now() - interval '3 hours'),
			('s', 'default', now() - interval '3 hours', now() - interval '3 hours'),
			('recent', 'default', now(), now())`)
		require.NoError(t, err)
		b.insert(t, 5, "succeeded", 2*time.Hour) // session "s": its finished turns expire, its queued one stays
		b.insert(t, 1, "queued", 5*time.Hour)

		require.NoError(t, c.Start(ctx))
		select {
		case n := <-sessions:
			require.Equal(t, 1, n, "only the session without turns and past retention")
		case <-time.After(30 * time.Second):
			t.Fatal("no round of session deletes")
		}
		require.NoError(t, c.Stop(ctx))
		var left []string
		rows, err := b.env.Pool.Query(ctx, `SELECT session_id FROM sessions ORDER BY session_id`)
		require.NoError(t, err)
		left, err = pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		require.Equal(t, []string{"recent", "s"}, left, "a session with a live turn and a recent one stay")
	})

	t.Run("DeletesIdleThreads", func(t *testing.T) {
		t.Parallel()
		threads := make(chan int, 10)
		c, b := setup(t, Config{
			Retention: time.Hour, Interval: time.Hour, Batch: 2, ThreadTTL: time.Hour,
			OnThreads: func(n int, err error) {
				if err != nil {
					t.Errorf("retention threads: %v", err)
				}
				threads <- n
			},
		})
		ctx := context.Background()
		// Five idle threads (more than a batch), one idle but busy (a queued run of its session
		// "default/busy"), one recently used.
		_, err := b.env.Pool.Exec(ctx, `INSERT INTO langgraph_threads (tenant, thread_id, updated_at)
			SELECT 'default', 'idle-' || i, now() - interval '2 hours' FROM generate_series(1, 5) i`)
		require.NoError(t, err)
		_, err = b.env.Pool.Exec(ctx, `INSERT INTO langgraph_threads (tenant, thread_id, updated_at) VALUES
			('default', 'busy', now() - interval '2 hours'), ('default', 'recent', now())`)
		require.NoError(t, err)
		_, err = b.env.Pool.Exec(ctx, `INSERT INTO turns (turn_id, session_id, tenant, status, accepted_at)
			VALUES (gen_random_uuid(), 'default/busy', 'default', 'queued', now())`)
		require.NoError(t, err)

		require.NoError(t, c.Start(ctx))
		select {
		case n := <-threads:
			require.Equal(t, 5, n, "the idle threads, in batches")
		case <-time.After(30 * time.Second):
			t.Fatal("no round of thread deletes")
		}
		require.NoError(t, c.Stop(ctx))
		rows, err := b.env.Pool.Query(ctx, `SELECT thread_id FROM langgraph_threads ORDER BY thread_id`)
		require.NoError(t, err)
		left, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		require.Equal(t, []string{"busy", "recent"}, left, "a thread with a run in flight and a recent one stay")
	})

	t.Run("StartStopStress", func(t *testing.T) {
		t.Parallel()
		c, b := setup(t, Config{Retention: time.Hour, Interval: 10 * time.Millisecond, Batch: 10})
		require.NoError(t, c.Stop(context.Background()), "stop before start")
		for range 5 {
			require.NoError(t, c.Start(context.Background()))
			require.NoError(t, c.Start(context.Background()), "start twice")
			<-b.round
			require.NoError(t, c.Stop(context.Background()))
			require.NoError(t, c.Stop(context.Background()), "stop twice")
			c = New(b.env.Pool, c.cfg, b.env.Log)
		}
	})
}
