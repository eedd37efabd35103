package integration

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/demo"
	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// TestWorkerCrash runs three worker processes over 500 turns of 50 sessions while one worker is
// SIGKILLed about every two seconds and restarted. Every turn must succeed exactly once: one
// completion, its two messages once in the session history, sessions started and recorded in intake
// order, and one turn.completed per turn in the stream, from the attempt Postgres records.
func TestWorkerCrash(t *testing.T) {
	const (
		sessions        = 50
		turnsPerSession = 10
		workers         = 3
	)
	c := newCluster(t, clusterOptions{
		Partitions: 6,
		LeaseTTL:   1500 * time.Millisecond,
		Heartbeat:  300 * time.Millisecond,
		// 24 slots for 50 sessions: the workers are busy, so the run lasts long enough for several
		// kills, and every kill catches turns in flight.
		MaxInflight: 8,
		// A crash counts as an attempt; with a kill every two seconds one turn can be hit several
		// times, so the cap is high here (the poison tests exercise the default cap).
		MaxAttempts: 20,
	})
	names := make([]string, workers)
	for i := range names {
		names[i] = fmt.Sprintf("w%d", i+1)
		c.startWorker(names[i])
	}

	type posted struct {
		id, text string
		ms       int
	}
	order := make([][]posted, sessions)
	var mu sync.Mutex
	var all []string
	var wg sync.WaitGroup
	postingDone := make(chan struct{})
	for s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			session := fmt.Sprintf("crash-%d", s)
			for i := range turnsPerSession {
				ms := 50 + rand.IntN(451)
				text := fmt.Sprintf("turn %d of %s", i, session)
				id := c.post(session, text, demoMeta(ms))
				mu.Lock()
				order[s] = append(order[s], posted{id: id, text: text, ms: ms})
				all = append(all, id)
				mu.Unlock()
			}
		}()
	}
	go func() { wg.Wait(); close(postingDone) }()
	allPosted := func() bool {
		select {
		case <-postingDone:
			return true
		default:
			return false
		}
	}
	ended := func() bool {
		if !allPosted() {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		return terminalCount(t, c.env, all) == len(all)
	}

	// From the first post on, kill one worker about every two seconds, in turn, and restart it,
	// until every turn ended. A kill waits until the group has settled after the last one (stable,
	// with exactly the live workers as members): the session timeout (2 s) is about the kill
	// interval, so otherwise a kill could come while the previous victim was still a member and
	// the group still rebalancing, and each kill would restart a rebalance that waits for dead
	// members, without end on a loaded machine (one run saw no worker assigned a partition after
	// its third kill).
	kills := 0
	deadline := time.Now().Add(100 * time.Second)
	for !ended() {
		require.True(t, time.Now().Before(deadline), "turns still not terminal after %d kills", kills)
		tick := time.NewTimer(1500*time.Millisecond + time.Duration(rand.IntN(1000))*time.Millisecond)
		<-tick.C
		if ended() {
			break
		}
		testenv.WaitFor(t, time.Until(deadline), "the worker group to settle after a kill", func() bool {
			return ended() || groupSettled(t, c.env, workers)
		})
		if ended() {
			break
		}
		name := names[kills%workers]
		c.kill(name)
		c.startWorker(name)
		kills++
	}
	t.Logf("all %d turns terminal after %d kills", len(all), kills)
	require.GreaterOrEqual(t, kills, 3, "the run must survive several kills to prove anything")

	var takeovers int
	for s := range sessions {
		session := fmt.Sprintf("crash-%d", s)
		turns := order[s]
		var prevFinished *time.Time
		for i, p := range turns {
			r := c.turn(p.id)
			require.Equal(t, "succeeded", r.Status, "turn %d of %s: %s", i, session, r.Error)
			require.NotNil(t, r.StartedAt)
			if prevFinished != nil {
				require.False(t, r.StartedAt.Before(*prevFinished), "%s: turn %d started before turn %d finished", session, i, i-1)
			}
			prevFinished = r.FinishedAt
			if r.Attempt > 1 {
				takeovers++
			}
		}
		// The history holds each turn's two messages once, in intake order.
		h := history(t, c.env, session)
		require.Len(t, h, 2*len(turns), session)
		for i, p := range turns {
			require.Equal(t, historyMsg{Seq: int64(2*i + 1), TurnID: p.id, Role: "user"}, h[2*i], session)
			require.Equal(t, historyMsg{Seq: int64(2*i + 2), TurnID: p.id, Role: "assistant"}, h[2*i+1], session)
		}
		// The stream: one turn.completed per turn from the winning attempt, nothing stale after a
		// takeover, and each turn starts only after the previous one completed.
		ids := make([]string, len(turns))
		for i, p := range turns {
			ids[i] = p.id
		}
		waitTerminalEvents(t, c.env, session, ids...)
		evs := readStream(t, c.env, session)
		for i, p := range turns {
			r := c.turn(p.id)
			requireFencedStream(t, evs, p.id, "turn.completed", r.Attempt)
			for _, e := range evs {
				if e.TurnID == p.id && e.Type == "turn.completed" {
					out, _ := e.Data["output"].(map[string]any)
					require.Equal(t, demo.Output(p.text, demo.Knobs{DurationMs: p.ms}), out["text"])
				}
			}
			if i > 0 {
				requireAfter(t, evs, turns[i-1].id, "turn.completed", p.id, "turn.started")
			}
		}
	}
	t.Logf("%d turns needed more than one attempt", takeovers)
	require.Positive(t, takeovers, "kills must have forced takeovers")
}

// requireAfter asserts that every event of type bType for turn b comes after the event aType of turn a.
func requireAfter(t *testing.T, evs []streamEvent, a, aType, b, bType string) {
	t.Helper()
	seenA := false
	for _, e := range evs {
		if e.TurnID == a && e.Type == aType {
			seenA = true
		}
		if e.TurnID == b && e.Type == bType {
			require.True(t, seenA, "%s of %s came before %s of %s", bType, b, aType, a)
		}
	}
}
