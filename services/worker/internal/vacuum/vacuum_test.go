package vacuum

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/turnstile-run/turnstile/pkg/testenv"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).backgroundHealthCheck"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).reaper"),
	)
}

type vacuumed struct {
	table string
	dead  int64
	err   error
}

// deadRows is the turns table's dead rows as the statistics report them.
func deadRows(t *testing.T, env *testenv.Env) int64 {
	t.Helper()
	var n int64
	require.NoError(t, env.Pool.QueryRow(context.Background(),
		`SELECT coalesce(n_dead_tup, 0) FROM pg_stat_user_tables WHERE relid = 'turns'::regclass`).Scan(&n))
	return n
}

// TestVacuumer rewrites every row of a turns table that autovacuum does not cover (its
// autovacuum_enabled option is off, whatever the server's setting): below the threshold nothing
// happens, above it the vacuumer runs VACUUM and the dead rows are gone.
func TestVacuumer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := testenv.New(t, testenv.Options{Partitions: 1})
	_, err := env.Pool.Exec(ctx, `ALTER TABLE turns SET (autovacuum_enabled = false)`)
	require.NoError(t, err)
	_, err = env.Pool.Exec(ctx, `INSERT INTO turns (turn_id, session_id, tenant, status, accepted_at)
		SELECT gen_random_uuid(), 's-' || (g % 50), 'default', 'queued', now() FROM generate_series(1, 2000) g`)
	require.NoError(t, err)
	_, err = env.Pool.Exec(ctx, `UPDATE turns SET status = 'running', lease_expires_at = now()`)
	require.NoError(t, err)
	testenv.WaitFor(t, 10*time.Second, "the statistics to count 2,000 dead rows", func() bool { return deadRows(t, env) >= 2000 })

	runs := make(chan vacuumed, 10)
	v := New(env.Pool, Config{MinDead: 3000, OnVacuum: func(table string, dead int64, _ time.Duration, err error) {
		runs <- vacuumed{table, dead, err}
	}}, env.Log)
	require.NoError(t, v.RunOnce(ctx))
	require.Empty(t, runs, "2,000 dead rows are under the threshold of 3,000")

	_, err = env.Pool.Exec(ctx, `UPDATE turns SET status = 'succeeded', finished_at = now(), lease_expires_at = NULL`)
	require.NoError(t, err)
	testenv.WaitFor(t, 10*time.Second, "the statistics to count 4,000 dead rows", func() bool { return deadRows(t, env) >= 4000 })
	require.NoError(t, v.RunOnce(ctx))
	require.Len(t, runs, 1)
	got := <-runs
	require.Equal(t, "turns", got.table)
	require.NoError(t, got.err)
	require.GreaterOrEqual(t, got.dead, int64(4000))
	require.Less(t, deadRows(t, env), int64(100), "VACUUM removed them and reported it")
	var analyzed bool
	require.NoError(t, env.Pool.QueryRow(ctx,
		`SELECT last_analyze IS NOT NULL FROM pg_stat_user_tables WHERE relid = 'turns'::regclass`).Scan(&analyzed))
	require.True(t, analyzed, "the planner's statistics were refreshed too")
}

// TestVacuumerLifecycle starts and stops the loop, also before it ran and twice.
func TestVacuumerLifecycle(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 1})
	ctx := context.Background()
	v := New(env.Pool, Config{Interval: time.Millisecond}, env.Log)
	require.NoError(t, v.Stop(ctx), "stop before start")
	require.NoError(t, v.Start(ctx))
	require.NoError(t, v.Stop(ctx))
	require.NoError(t, v.Stop(ctx))
}

func TestVacuumerDefaults(t *testing.T) {
	t.Parallel()
	v := New(nil, Config{}, nil)
	require.Equal(t, IntervalDefault, v.cfg.Interval)
	require.Equal(t, int64(MinDeadDefault), v.cfg.MinDead)
	require.Equal(t, DeadFractionDefault, v.cfg.DeadFraction)
	require.Equal(t, 5*time.Second, IntervalDefault)
	require.Equal(t, 5000, MinDeadDefault)
	require.Equal(t, 0.05, DeadFractionDefault)
}
