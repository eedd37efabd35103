package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// TestManyAgentsOrderThroughKill runs sessions whose turns alternate between two agents, each
// agent's turns consumed by its own lane in two worker processes, and SIGKILLs one worker while
// the sessions run (invariant 16, through a crash). Every turn succeeds, each session's turns
// start in the order intake accepted them, and none starts before the previous one is terminal.
//
// The turns of a session are in different topics, so no consumer sees them together: the order
// rests on the claim's check (pkg/turnstore, claim.sql) seeing every earlier turn's row, which
// intake writes before it answers when the catalog has several agents (package record, Record).
func TestManyAgentsOrderThroughKill(t *testing.T) {
	t.Parallel()
	const (
		sessions        = 6
		turnsPerSession = 8
	)
	file := filepath.Join(t.TempDir(), "agents.yaml")
	require.NoError(t, os.WriteFile(file, []byte(manyAgentsFile), 0o600))
	c := newCluster(t, clusterOptions{
		Partitions: 2,
		LeaseTTL:   1500 * time.Millisecond,
		Heartbeat:  300 * time.Millisecond,
		// A kill counts as an attempt of the turn it caught.
		MaxAttempts: 10,
		FrontEnv:    []string{"TURNSTILE_AGENTS_FILE=" + file},
		WorkerEnv:   []string{"TURNSTILE_AGENTS_FILE=" + file, "TURNSTILE_WORKER_AGENTS=support,research"},
	})
	c.startWorker("w1")
	c.startWorker("w2")

	order := make([][]string, sessions)
	var wg sync.WaitGroup
	for s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			session := fmt.Sprintf("alt-%d", s)
			for i := range turnsPerSession {
				agent := []string{"support", "research"}[i%2]
				order[s] = append(order[s], postTurnWith(t, c.base, session, map[string]any{
					"input": map[string]string{"text": fmt.Sprintf("turn %d of %s", i, session)}, "agent": agent,
					"metadata": demoMeta(150),
				}))
			}
		}()
	}
	ctx := context.Background()
	started := func() int {
		var n int
		require.NoError(t, c.env.Pool.QueryRow(ctx, `SELECT count(*) FROM turns WHERE started_at IS NOT NULL`).Scan(&n))
		return n
	}
	// Kill while the sessions are under way: some of their turns ran, more are queued behind them.
	testenv.WaitFor(t, 60*time.Second, "a fifth of the turns to start", func() bool { return started() >= sessions*turnsPerSession/5 })
	c.kill("w1")
	c.startWorker("w1")
	wg.Wait()
	var all []string
	for _, ids := range order {
		all = append(all, ids...)
	}
	testenv.WaitFor(t, 90*time.Second, "every turn to end", func() bool { return terminalCount(t, c.env, all) == len(all) })

	var retried int
	for s, ids := range order {
		var lastFinish time.Time
		for i, id := range ids {
			var status, agent string
			var attempt int
			var startedAt, finished time.Time
			require.NoError(t, c.env.Pool.QueryRow(ctx, `SELECT status, agent, attempt, started_at, finished_at FROM turns WHERE turn_id = $1::uuid`,
				id).Scan(&status, &agent, &attempt, &startedAt, &finished))
			require.Equal(t, "succeeded", status, "turn %d of session %d", i, s)
			require.Equal(t, []string{"support", "research"}[i%2], agent)
			require.False(t, startedAt.Before(lastFinish),
				"turn %d of session %d started %s before the previous one finished", i, s, lastFinish.Sub(startedAt))
			lastFinish = finished
			if attempt > 1 {
				retried++
			}
		}
	}
	t.Logf("%d turns of %d sessions alternating between two agents, in order; %d taken over after the kill", len(all), sessions, retried)
}
