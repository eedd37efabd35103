package cancelwatch

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
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

func TestWatcher(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := testenv.New(t, testenv.Options{Partitions: 1})
	got := make(chan uuid.UUID, 10)
	listening := make(chan struct{}, 10)
	w := New(env.Pool, func(id uuid.UUID) { got <- id }, env.Log)
	w.Listening = func() { listening <- struct{}{} }

	require.NoError(t, w.Stop(ctx), "stop before start")
	require.NoError(t, w.Start(ctx))
	require.NoError(t, w.Start(ctx), "start twice")
	<-listening

	insert := func(status string, cancel bool) uuid.UUID {
		id := uuid.New()
		_, err := env.Pool.Exec(ctx, `INSERT INTO turns (turn_id, session_id, tenant, status, cancel_requested, accepted_at)
			VALUES ($1, 's', 'default', $2, $3, now())`, id, status, cancel)
		require.NoError(t, err)
		return id
	}
	queued := insert("queued", false)
	running := insert("running", false)
	// Only a running turn's cancel is announced: a queued one is seen by its claim.
	_, err := env.Pool.Exec(ctx, `UPDATE turns SET cancel_requested = true WHERE turn_id = ANY($1::uuid[])`, []uuid.UUID{queued, running})
	require.NoError(t, err)
	select {
	case id := <-got:
		require.Equal(t, running, id)
	case <-time.After(10 * time.Second):
		t.Fatal("no cancel notification")
	}
	// Setting the flag again announces nothing new.
	_, err = env.Pool.Exec(ctx, `UPDATE turns SET cancel_requested = true WHERE turn_id = $1`, running)
	require.NoError(t, err)
	later := insert("running", false)
	_, err = env.Pool.Exec(ctx, `UPDATE turns SET cancel_requested = true WHERE turn_id = $1`, later)
	require.NoError(t, err)
	require.Equal(t, later, <-got, "notifications arrive in commit order, the repeated flag sent none")

	require.NoError(t, w.Stop(ctx))
	require.NoError(t, w.Stop(ctx), "stop twice")
}
