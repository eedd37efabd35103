package integration

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/pkg/turnstore"
)

// TestWorkerCancel cancels a running turn (its context ends at once, by notification, well within a
// heartbeat) and a turn queued behind it in the same session (it never starts). Both end cancelled
// with turn.cancelled. A cancel whose notification is lost still arrives with the next renewal.
func TestWorkerCancel(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 1})
	env.Config.LeaseTTL = 10 * time.Second
	env.Config.Heartbeat = 2 * time.Second
	stack := startStack(t, env, "intake,worker,gateway")
	base := "http://" + stack.Addr()
	store := turnstore.New(env.Pool)
	ctx := context.Background()
	const session = "cancel"

	running := postTurnWith(t, base, session, map[string]any{"input": map[string]string{"text": "long"}, "metadata": demoMeta(30000)})
	queued := postTurnWith(t, base, session, map[string]any{"input": map[string]string{"text": "next"}, "metadata": demoMeta(100)})
	after := postTurnWith(t, base, session, map[string]any{"input": map[string]string{"text": "after"}, "metadata": demoMeta(100)})
	testenv.WaitFor(t, 30*time.Second, "the first turn to run", func() bool { return readTurn(t, env, running).Status == "running" })
	testenv.WaitFor(t, 30*time.Second, "the worker to listen for cancels", func() bool {
		var n int
		require.NoError(t, env.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE query = $1`,
			`LISTEN "`+env.Config.DatabaseSchema+`.turn_cancel"`).Scan(&n))
		return n > 0
	})

	c, err := store.RequestCancel(ctx, uuid.MustParse(queued), storeKey(session), "default")
	require.NoError(t, err)
	require.True(t, c.Live)
	require.True(t, c.Ended, "a queued turn's cancel is terminal at once")
	require.Equal(t, "cancelled", readTurn(t, env, queued).Status)
	sent := time.Now()
	c, err = store.RequestCancel(ctx, uuid.MustParse(running), storeKey(session), "default")
	require.NoError(t, err)
	require.True(t, c.Live)
	require.False(t, c.Ended, "a running turn's worker ends it")
	testenv.WaitFor(t, 30*time.Second, "the running turn to be cancelled", func() bool {
		return readTurn(t, env, running).Status == "cancelled"
	})
	took := time.Since(sent)
	t.Logf("running turn cancelled %v after the request (heartbeat %v)", took.Round(time.Millisecond), env.Config.Heartbeat)
	// The notification beats the heartbeat (2 s) by far; generous for a loaded machine.
	require.Less(t, took, env.Config.Heartbeat/2)

	testenv.WaitFor(t, 30*time.Second, "the rest of the session to end", func() bool {
		return terminalCount(t, env, []string{queued, after}) == 2
	})
	q := readTurn(t, env, queued)
	require.Equal(t, "cancelled", q.Status)
	require.Nil(t, q.StartedAt, "a cancelled queued turn never starts")
	require.Equal(t, "succeeded", readTurn(t, env, after).Status, "the session moves on")

	waitTerminalEvents(t, env, session, running, queued, after)
	evs := readStream(t, env, session)
	requireFencedStream(t, evs, running, "turn.cancelled", 1)
	requireFencedStream(t, evs, queued, "turn.cancelled", 0)
	for _, e := range evs {
		require.False(t, e.TurnID == queued && e.Type != "turn.cancelled", "the queued turn published %s", e.Type)
	}
	requireAfter(t, evs, running, "turn.cancelled", after, "turn.started")
	h := history(t, env, session)
	require.Len(t, h, 2, "only the turn that ran to the end is in the history")
	require.Equal(t, after, h[0].TurnID)

	// A cancel whose notification never comes (triggers off for this session, as if the worker's
	// listening connection were down) is still seen at the next renewal.
	other := postTurnWith(t, base, "cancel-2", map[string]any{"input": map[string]string{"text": "long"}, "metadata": demoMeta(30000)})
	testenv.WaitFor(t, 30*time.Second, "the other turn to run", func() bool { return readTurn(t, env, other).Status == "running" })
	conn, err := env.Pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, `SET session_replication_role = replica`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `UPDATE turns SET cancel_requested = true WHERE turn_id = $1`, other)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `RESET session_replication_role`)
	require.NoError(t, err)
	sent = time.Now()
	testenv.WaitFor(t, 30*time.Second, "the other turn to be cancelled", func() bool {
		return readTurn(t, env, other).Status == "cancelled"
	})
	took = time.Since(sent)
	t.Logf("cancel without notification took %v", took.Round(time.Millisecond))
	require.Less(t, took, 2*env.Config.Heartbeat+time.Second, "within a heartbeat (and the statements around it)")
}
