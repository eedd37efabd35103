package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// TestWorkerZombieAfterRedisLoss is TestWorkerZombie with Redis losing all its data between the
// takeover's completion and the zombie's wake: the fences Redis held are gone, and the zombie's
// attempt-1 writes must still be refused, as Postgres's tokens say the turns moved on. The stream
// of the new generation holds nothing of the turns at all: no stale delta, and no second
// turn.completed.
func TestWorkerZombieAfterRedisLoss(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOptions{Partitions: 1, LeaseTTL: 1500 * time.Millisecond, Heartbeat: 300 * time.Millisecond, OwnRedis: true})
	w1 := c.startWorker("w1")
	const turns = 4
	sessions := make([]string, turns)
	ids := make([]string, turns)
	for i := range sessions {
		sessions[i] = fmt.Sprintf("zombie-loss-%d", i)
		ids[i] = c.post(sessions[i], "keep talking", map[string]any{"demo": map[string]any{"duration_ms": 4000, "tokens": 40}})
	}
	for _, s := range sessions {
		waitFirstDeltas(t, c.env, s)
	}
	require.NoError(t, w1.Signal(syscall.SIGSTOP))
	t.Cleanup(func() { _ = w1.Signal(syscall.SIGCONT) })

	c.startWorker("w2")
	for i, id := range ids {
		testenv.WaitFor(t, 60*time.Second, "the takeover to complete turn "+id, func() bool {
			return c.turn(id).Status == "succeeded"
		})
		require.Equal(t, 2, c.turn(id).Attempt, "the second attempt wins")
		waitTerminalEvents(t, c.env, sessions[i], id)
		requireFencedStream(t, readStream(t, c.env, sessions[i]), id, "turn.completed", 2)
	}

	c.env.RedisServer.FlushAll()

	// Wake the zombie: it carries on with its attempts until Postgres's tokens refuse them.
	require.NoError(t, w1.Signal(syscall.SIGCONT))
	testenv.WaitFor(t, 30*time.Second, "the zombie to notice it lost every lease", func() bool {
		logs := strings.Split(w1.Logs(), "\n")
		for _, id := range ids {
			noticed := false
			for _, l := range logs {
				if strings.Contains(l, id) && (strings.Contains(l, "attempt lost its lease") || strings.Contains(l, "completion fenced")) {
					noticed = true
					break
				}
			}
			if !noticed {
				return false
			}
		}
		return true
	})
	var stale []string
	for i, id := range ids {
		for _, e := range readStream(t, c.env, sessions[i]) {
			if e.TurnID == id {
				stale = append(stale, fmt.Sprintf("%s: %s of attempt %d", sessions[i], e.Type, e.Attempt))
			}
		}
	}
	require.Empty(t, stale, "after the loss the streams hold events of the finished turns")
	for i, id := range ids {
		r := c.turn(id)
		require.Equal(t, "succeeded", r.Status)
		require.Equal(t, 2, r.Attempt)
		require.Equal(t, []historyMsg{{1, id, "user"}, {2, id, "assistant"}}, history(t, c.env, sessions[i]))
	}
}

// TestIdempotentRepostAfterRedisLoss re-posts the Idempotency-Key of a turn that finished before
// Redis lost its data (the server restarts empty): intake accepts it again, as its record of the key
// went with Redis, and the worker finds the turn finished. The turn's terminal event was published
// before the loss, so none is appended again: the new generation of the stream holds nothing of the
// old turn, and the session's next turn streams as usual.
func TestIdempotentRepostAfterRedisLoss(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOptions{Partitions: 1, OwnRedis: true})
	c.startWorker("w1")
	const session, body = "repost-loss", `{"input":{"text":"once"},"metadata":{"demo":{"tokens":2}}}`
	key := map[string]string{"Idempotency-Key": "repost-after-loss"}

	status, b := post(t, c.base, session, body, key)
	require.Equal(t, http.StatusAccepted, status, string(b))
	id := acceptedID(t, b)
	testenv.WaitFor(t, 30*time.Second, "the turn to succeed", func() bool { return c.turn(id).Status == "succeeded" })
	waitTerminalEvents(t, c.env, session, id)
	requireFencedStream(t, readStream(t, c.env, session), id, "turn.completed", 1)

	c.env.RedisServer.Restart()

	status, b = post(t, c.base, session, body, key)
	require.Equal(t, http.StatusAccepted, status, string(b))
	require.Equal(t, id, acceptedID(t, b), "the key names the same turn")
	// The session's records run in order, so once the next turn's events are in, the re-posted
	// record has been dealt with.
	next := c.post(session, "and then", map[string]any{"demo": map[string]any{"tokens": 2}})
	testenv.WaitFor(t, 30*time.Second, "the next turn to succeed", func() bool { return c.turn(next).Status == "succeeded" })
	waitTerminalEvents(t, c.env, session, next)

	evs := readStream(t, c.env, session)
	for _, e := range evs {
		require.NotEqual(t, id, e.TurnID, "after the loss the stream holds %s of the finished turn", e.Type)
	}
	requireFencedStream(t, evs, next, "turn.completed", 1)
	r := c.turn(id)
	require.Equal(t, "succeeded", r.Status)
	require.Equal(t, 1, r.Attempt)
}

func acceptedID(t *testing.T, body []byte) string {
	t.Helper()
	var a accepted
	require.NoError(t, json.Unmarshal(body, &a))
	return a.TurnID
}
