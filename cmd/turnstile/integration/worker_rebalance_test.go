package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// postSessions posts n turns to each of the given sessions, in order per session, and returns the
// IDs per session in intake order and all of them.
func (c *cluster) postSessions(prefix string, sessions, n, ms int) ([][]string, []string) {
	order := make([][]string, sessions)
	var wg sync.WaitGroup
	for s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range n {
				order[s] = append(order[s], c.post(fmt.Sprintf("%s-%d", prefix, s), fmt.Sprintf("turn %d", i), demoMeta(ms)))
			}
		}()
	}
	wg.Wait()
	var all []string
	for _, o := range order {
		all = append(all, o...)
	}
	return order, all
}

// requireOrdered checks that every turn succeeded, each session's turns started after the previous
// one finished, and the history holds each turn once in intake order.
func (c *cluster) requireOrdered(prefix string, order [][]string) {
	t := c.t
	for s, ids := range order {
		session := fmt.Sprintf("%s-%d", prefix, s)
		var prevFinished *time.Time
		for i, id := range ids {
			r := c.turn(id)
			require.Equal(t, "succeeded", r.Status, "%s turn %d: %s", session, i, r.Error)
			if prevFinished != nil {
				require.False(t, r.StartedAt.Before(*prevFinished), "%s: turn %d started before turn %d finished", session, i, i-1)
			}
			prevFinished = r.FinishedAt
		}
		h := history(t, c.env, session)
		require.Len(t, h, 2*len(ids), session)
		for i, id := range ids {
			require.Equal(t, id, h[2*i].TurnID, session)
			require.Equal(t, id, h[2*i+1].TurnID, session)
		}
	}
}

// TestWorkerRebalance starts a second worker while the first is busy: partitions move while turns
// run, yet no turn runs twice (every turn succeeds on its first attempt, with one turn.started) and
// no session is reordered.
func TestWorkerRebalance(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOptions{Partitions: 4, MaxInflight: 16})
	c.startWorker("w1")
	order, all := c.postSessions("rebalance", 16, 12, 400)
	testenv.WaitFor(t, 60*time.Second, "a quarter of the turns to end", func() bool { return terminalCount(t, c.env, all) >= len(all)/4 })
	w2 := c.startWorker("w2")
	testenv.WaitFor(t, 120*time.Second, "every turn to end", func() bool { return terminalCount(t, c.env, all) == len(all) })

	c.requireOrdered("rebalance", order)
	for s, ids := range order {
		waitTerminalEvents(t, c.env, fmt.Sprintf("rebalance-%d", s), ids...)
		evs := readStream(t, c.env, fmt.Sprintf("rebalance-%d", s))
		for _, id := range ids {
			r := c.turn(id)
			require.Equal(t, 1, r.Attempt, "turn %s ran more than once", id)
			requireFencedStream(t, evs, id, "turn.completed", 1)
			started := 0
			for _, e := range evs {
				if e.TurnID == id && e.Type == "turn.started" {
					started++
				}
			}
			require.Equal(t, 1, started, "turn %s", id)
		}
	}
	require.Contains(t, w2.Logs(), "turn succeeded", "the second worker took over part of the work")
}

// TestWorkerDrain SIGTERMs a worker with turns in flight that outlast its drain timeout: it exits
// cleanly within the timeout, hands the unfinished turns off (released leases, not counted as
// attempts) and the other worker finishes them at once; nothing is lost or reordered.
func TestWorkerDrain(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOptions{Partitions: 4, DrainTimeout: time.Second, LeaseTTL: 10 * time.Second, Heartbeat: time.Second})
	w1 := c.startWorker("w1")
	order, all := c.postSessions("drain", 8, 3, 3000)
	testenv.WaitFor(t, 60*time.Second, "the first worker to run turns", func() bool {
		var n int
		require.NoError(t, c.env.Pool.QueryRow(context.Background(), `SELECT count(*) FROM turns
			WHERE status = 'running' AND lease_owner LIKE 'w1-%'`).Scan(&n))
		return n >= 4
	})
	c.startWorker("w2")
	sent := time.Now()
	require.NoError(t, w1.Signal(syscall.SIGTERM))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, w1.Wait(ctx), "the draining worker exits cleanly:\n%s", w1.Logs())
	t.Logf("worker drained and exited in %v", time.Since(sent).Round(time.Millisecond))
	require.Contains(t, w1.Logs(), "turn handed off on drain")

	// The lease is 10 s: the rest finishing well before a lease could expire proves the hand-off.
	testenv.WaitFor(t, 60*time.Second, "every turn to end", func() bool { return terminalCount(t, c.env, all) == len(all) })
	c.requireOrdered("drain", order)
	handedOff := 0
	for _, id := range all {
		r := c.turn(id)
		require.LessOrEqual(t, r.Attempt-r.Handoffs, 1, "a hand-off does not count as a failed attempt")
		handedOff += r.Handoffs
		if r.Handoffs > 0 {
			require.Less(t, r.FinishedAt.Sub(sent), 9*time.Second, "a handed-off turn is taken over at once, not after its lease expired")
		}
	}
	require.Positive(t, handedOff)
	require.False(t, strings.Contains(w1.Logs(), "level\":\"ERROR"), "no errors while draining:\n%s", w1.Logs())
}
