package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/postgres"
	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// TestPushConfigsBound drives migration 00180's trigger with plain SQL, as the statements that
// store push configs do: a pool opened with PushConfigsMax sets the bound for its sessions, one
// statement inserting past it stores the bound and skips the rest, a stored config is still
// replaced at the bound, concurrent transactions inserting into one task store the bound between
// them, and a session without the setting gets the trigger's own 10.
func TestPushConfigsBound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := testenv.New(t, testenv.Options{Partitions: 1})
	pool, err := postgres.NewPool(ctx, env.Config.DatabaseURL, postgres.Options{Schema: env.Config.DatabaseSchema, PushConfigsMax: 3})
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	count := func(task string) int {
		t.Helper()
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM task_push_configs WHERE task_id = $1`, task).Scan(&n))
		return n
	}
	const insert = `INSERT INTO task_push_configs (task_id, config_id, tenant, url)
		SELECT $1, 'c' || i, 'acme', 'https://example.com/h' FROM generate_series(1, $2::int) i
		ON CONFLICT (task_id, config_id) DO UPDATE SET url = EXCLUDED.url`

	var setting string
	require.NoError(t, pool.QueryRow(ctx, `SELECT current_setting('turnstile.push_configs_max')`).Scan(&setting))
	require.Equal(t, "3", setting, "the pool's sessions carry the bound")

	const one = "00000000-0000-4000-8000-0000000000b1"
	tag, err := pool.Exec(ctx, insert, one, 5)
	require.NoError(t, err)
	require.EqualValues(t, 3, tag.RowsAffected(), "one statement stores up to the bound")
	require.Equal(t, 3, count(one))
	_, err = pool.Exec(ctx, `INSERT INTO task_push_configs (task_id, config_id, tenant, url) VALUES ($1, 'c1', 'acme', 'https://example.com/new')
		ON CONFLICT (task_id, config_id) DO UPDATE SET url = EXCLUDED.url`, one)
	require.NoError(t, err)
	var url string
	require.NoError(t, pool.QueryRow(ctx, `SELECT url FROM task_push_configs WHERE task_id = $1 AND config_id = 'c1'`, one).Scan(&url))
	require.Equal(t, "https://example.com/new", url, "a stored config is replaced at the bound")

	// Concurrent transactions, each holding its insert open until all have tried: without the
	// lock each would count the others' rows as absent.
	const two = "00000000-0000-4000-8000-0000000000b2"
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Go(func() {
			tx, err := pool.Begin(ctx)
			if !assertNoError(t, err) {
				return
			}
			defer func() { _ = tx.Rollback(ctx) }()
			_, err = tx.Exec(ctx, `INSERT INTO task_push_configs (task_id, config_id, tenant, url) VALUES ($1, $2, 'acme', 'https://example.com/h')`,
				two, fmt.Sprintf("r%d", i))
			if assertNoError(t, err) {
				assertNoError(t, tx.Commit(ctx))
			}
		})
	}
	wg.Wait()
	require.Equal(t, 3, count(two), "concurrent writers store the bound between them")

	// A session without the setting: the trigger's default.
	const three = "00000000-0000-4000-8000-0000000000b3"
	_, err = env.Pool.Exec(ctx, insert, three, 15)
	require.NoError(t, err)
	require.Equal(t, 10, count(three))
}

func assertNoError(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Errorf("unexpected error: %v", err)
		return false
	}
	return true
}
