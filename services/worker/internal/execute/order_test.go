package execute

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/pkg/wire"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/agenttest"
	"github.com/turnstile-run/turnstile/services/worker/internal/consume"
)

// TestHandleDefersBehindEarlierTurn checks per-session order at the claim: the record of a
// session's later turn, handled while an earlier accepted turn of the session is queued (its record
// lost and not yet re-driven), is deferred without running, without an attempt and without an
// event; once the earlier turn has run, the same record runs.
func TestHandleDefersBehindEarlierTurn(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 1})
	var blocked atomic.Int32
	f := newUpstreamFixture(t, env, fixtureOptions{hooks: Hooks{Blocked: func() { blocked.Add(1) }}},
		func(int) agenttest.ChatAnswer { return agenttest.ChatAnswer{Words: []string{"ok"}} })
	ctx := context.Background()

	earlierRec, earlier := f.record(t, time.Minute)
	laterRec, later := f.record(t, time.Minute)
	// Both of one session, the later accepted a second after the earlier.
	later.SessionID, later.AcceptedAt = earlier.SessionID, earlier.AcceptedAt.Add(time.Second)
	b, err := later.Encode()
	require.NoError(t, err)
	laterRec.Key, laterRec.Value = []byte(earlier.SessionID), b
	_, err = env.Pool.Exec(ctx, `INSERT INTO turns (turn_id, session_id, tenant, status, accepted_at, deadline, input)
		VALUES ($1, $2, 'default', 'queued', $3, $4, '{"text": "hi"}')`,
		earlier.TurnID, earlier.SessionKey().String(), earlier.AcceptedAt, earlier.Deadline)
	require.NoError(t, err)

	require.Equal(t, consume.Defer, f.x.Handle(ctx, laterRec))
	require.EqualValues(t, 1, blocked.Load())
	var n int
	require.NoError(t, env.Pool.QueryRow(ctx, `SELECT count(*) FROM turns WHERE turn_id = $1`, later.TurnID).Scan(&n))
	require.Zero(t, n, "a blocked claim leaves no row and no attempt")
	require.Empty(t, f.events(t, earlier.SessionID), "nothing was published")

	require.Equal(t, consume.Commit, f.x.Handle(ctx, earlierRec))
	require.Equal(t, consume.Commit, f.x.Handle(ctx, laterRec))
	for _, id := range []uuid.UUID{earlier.TurnID, later.TurnID} {
		var status string
		require.NoError(t, env.Pool.QueryRow(ctx, `SELECT status FROM turns WHERE turn_id = $1`, id).Scan(&status))
		require.Equal(t, string(wire.StatusSucceeded), status)
	}
	var first, second time.Time
	require.NoError(t, env.Pool.QueryRow(ctx, `SELECT finished_at FROM turns WHERE turn_id = $1`, earlier.TurnID).Scan(&first))
	require.NoError(t, env.Pool.QueryRow(ctx, `SELECT started_at FROM turns WHERE turn_id = $1`, later.TurnID).Scan(&second))
	require.False(t, second.Before(first), "the later turn started after the earlier one ended")
}
