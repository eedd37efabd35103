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

// TestWorkerCancel cancels a running turn (its context ends within a heartbeat) and a turn queued
// behind it in the same session (it never starts). Both end cancelled with turn.cancelled.
func TestWorkerCancel(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 1})
	stack := startStack(t, env, "intake,worker,gateway")
	base := "http://" + stack.Addr()
	store := turnstore.New(env.Pool)
	ctx := context.Background()
	const session = "cancel"

	running := postTurnWith(t, base, session, map[string]any{"input": map[string]string{"text": "long"}, "metadata": demoMeta(30000)})
	queued := postTurnWith(t, base, session, map[string]any{"input": map[string]string{"text": "next"}, "metadata": demoMeta(100)})
	after := postTurnWith(t, base, session, map[string]any{"input": map[string]string{"text": "after"}, "metadata": demoMeta(100)})
	testenv.WaitFor(t, 30*time.Second, "the first turn to run", func() bool { return readTurn(t, env, running).Status == "running" })

	live, err := store.RequestCancel(ctx, uuid.MustParse(queued), session, "default")
	require.NoError(t, err)
	require.True(t, live)
	sent := time.Now()
	live, err = store.RequestCancel(ctx, uuid.MustParse(running), session, "default")
	require.NoError(t, err)
	require.True(t, live)
	testenv.WaitFor(t, 30*time.Second, "the running turn to be cancelled", func() bool {
		return readTurn(t, env, running).Status == "cancelled"
	})
	took := time.Since(sent)
	t.Logf("running turn cancelled %v after the request (heartbeat %v)", took.Round(time.Millisecond), env.Config.Heartbeat)
	// One heartbeat plus the statements around it; generous for a loaded machine, yet far below the
	// 30 s the turn would otherwise run.
	require.Less(t, took, 4*env.Config.Heartbeat+time.Second)

	testenv.WaitFor(t, 30*time.Second, "the rest of the session to end", func() bool {
		return terminalCount(t, env, []string{queued, after}) == 2
	})
	q := readTurn(t, env, queued)
	require.Equal(t, "cancelled", q.Status)
	require.Nil(t, q.StartedAt, "a cancelled queued turn never starts")
	require.Equal(t, "succeeded", readTurn(t, env, after).Status, "the session moves on")

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
}
