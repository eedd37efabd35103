package integration

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// TestWorkerRedisOutage cuts a worker off from Redis while a turn streams. The attempt's publishes
// fail after their retries, the attempt ends and the turn is retried; once Redis is back a later
// attempt completes it. The stream stays consistent across the attempts: each attempt in it opens
// with its turn.started (after turn.retrying, for a retry), held back or not, the terminal event
// comes once from the winning attempt, and the history holds the turn once.
func TestWorkerRedisOutage(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOptions{Partitions: 1, MaxAttempts: 10, LeaseTTL: 2 * time.Second, Heartbeat: 400 * time.Millisecond})
	proxy, w := startWorkerBehindRedisProxy(t, c, "w1")

	const session = "redis-outage"
	id := c.post(session, "keep talking", map[string]any{"demo": map[string]any{"duration_ms": 3000, "tokens": 30}})
	waitFirstDeltas(t, c.env, session)

	proxy.Cut(testenv.Reset)
	testenv.WaitFor(t, 30*time.Second, "the attempt to fail for want of Redis", func() bool {
		return strings.Contains(w.Logs(), "attempt failed; will retry")
	})
	proxy.Restore()
	testenv.WaitFor(t, 60*time.Second, "the turn to complete after Redis is back", func() bool {
		return c.turn(id).Status == "succeeded"
	})
	r := c.turn(id)
	require.Greater(t, r.Attempt, 1, "the attempt cut off from Redis did not finish the turn")
	waitTerminalEvents(t, c.env, session, id)
	evs := readStream(t, c.env, session)
	requireFencedStream(t, evs, id, "turn.completed", r.Attempt)

	t.Logf("the turn finished in attempt %d", r.Attempt)
	// Every attempt the stream shows opens with its turn.started, a retry's after its turn.retrying.
	opening := map[int][]string{}
	for _, e := range evs {
		if e.TurnID != id || len(opening[e.Attempt]) == 2 {
			continue
		}
		opening[e.Attempt] = append(opening[e.Attempt], e.Type)
	}
	require.Equal(t, "turn.started", opening[1][0], "attempt 1 opens with %v", opening[1])
	for a, first := range opening {
		if a > 1 {
			require.Equal(t, []string{"turn.retrying", "turn.started"}, first, "attempt %d opens with %v", a, first)
		}
	}
	require.Equal(t, []historyMsg{{1, id, "user"}, {2, id, "assistant"}}, history(t, c.env, session))
}

// TestWorkerRedisOutageQuickTurn cuts a worker off from Redis and then posts a quick turn: the
// turn completes in Postgres without Redis, its whole group (turn.started, the delta,
// turn.completed) waits for Redis in the worker for longer than any other group would (more than
// the five tries in all), and once Redis is back it is in the stream, once, from the one attempt.
func TestWorkerRedisOutageQuickTurn(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOptions{Partitions: 1})
	proxy, w := startWorkerBehindRedisProxy(t, c, "w1")

	const session = "redis-outage-quick"
	quick := map[string]any{"demo": map[string]any{"tokens": 1}}
	first := c.post(session, "before the cut", quick)
	waitTerminalEvents(t, c.env, session, first)

	proxy.Cut(testenv.Reset)
	id := c.post(session, "during the cut", quick)
	testenv.WaitFor(t, 20*time.Second, "the turn to complete in Postgres without Redis", func() bool {
		return c.turn(id).Status == "succeeded"
	})
	testenv.WaitFor(t, 20*time.Second, "the turn's group to be tried more often than five times", func() bool {
		return scrape(t, w.Addr, `turnstile_worker_publish_retries_total{group="terminal"}`) >= 5
	})
	for _, e := range readStream(t, c.env, session) {
		require.NotEqual(t, id, e.TurnID, "nothing of the turn can be in the stream while Redis is cut off")
	}
	proxy.Restore()
	waitTerminalEvents(t, c.env, session, id)
	var types []string
	for _, e := range readStream(t, c.env, session) {
		if e.TurnID == id {
			require.Equal(t, 1, e.Attempt)
			types = append(types, e.Type)
		}
	}
	require.Equal(t, []string{"turn.started", "turn.delta", "turn.completed"}, types)
	require.Equal(t, 1, c.turn(id).Attempt)
}

// startWorkerBehindRedisProxy starts the named worker with its Redis reached through a proxy the
// test can cut.
func startWorkerBehindRedisProxy(t *testing.T, c *cluster, name string) (*testenv.Proxy, *testenv.Process) {
	t.Helper()
	ru, err := url.Parse(c.env.Config.RedisURL)
	require.NoError(t, err)
	proxy := testenv.NewProxy(t, ru.Host)
	ru.Host = proxy.Addr()
	return proxy, c.startWorker(name, "TURNSTILE_REDIS_URL="+ru.String())
}
