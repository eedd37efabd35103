package integration

import (
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// TestWorkerPostgresOutage cuts a worker off from Postgres while it runs a turn, once as an outage
// that refuses connections and once as a partition that swallows them. The worker must keep the
// turn going while its lease is still valid (Redis is fine, so the stream keeps flowing), stop it
// once the lease has really expired, and after Postgres is back run it again as attempt 2 that
// completes once: one terminal event from attempt 2, one copy of the history.
func TestWorkerPostgresOutage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		mode testenv.FaultMode
	}{{"refused", testenv.Reset}, {"partitioned", testenv.Blackhole}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const ttl, heartbeat = 2 * time.Second, 400 * time.Millisecond
			c := newCluster(t, clusterOptions{Partitions: 1, LeaseTTL: ttl, Heartbeat: heartbeat})
			dsn, err := url.Parse(c.env.Config.DatabaseURL)
			require.NoError(t, err)
			proxy := testenv.NewProxy(t, dsn.Host)
			dsn.Host = proxy.Addr()
			w := c.startWorker("w1", "TURNSTILE_DATABASE_URL="+dsn.String())

			session := "pg-outage-" + tc.name
			id := c.post(session, "keep talking", map[string]any{"demo": map[string]any{"duration_ms": 6000, "tokens": 60}})
			waitFirstDeltas(t, c.env, session)

			cutAt := time.Now()
			proxy.Cut(tc.mode)
			testenv.WaitFor(t, 30*time.Second, "the worker to give the attempt up", func() bool {
				return strings.Contains(w.Logs(), "attempt lost its lease")
			})
			require.Contains(t, w.Logs(), "lease renewal failed", "renewals were tried and failed")

			// While the lease was valid the attempt went on; it stopped within a heartbeat of the
			// lease's real end (the last renewal was at most one heartbeat before the cut).
			var last time.Time
			for _, e := range readStream(t, c.env, session) {
				if e.TurnID == id && e.Attempt == 1 {
					last = streamTime(t, e.ID)
				}
			}
			require.Greater(t, last.Sub(cutAt), ttl/4, "the attempt kept streaming after Postgres went away")
			require.Less(t, last.Sub(cutAt), ttl+2*heartbeat+time.Second, "the attempt stopped once its lease had expired")

			restoredAt := time.Now()
			proxy.Restore()
			testenv.WaitFor(t, 60*time.Second, "the turn to complete after Postgres is back", func() bool {
				return c.turn(id).Status == "succeeded"
			})
			t.Logf("attempt 1 streamed for %v after the cut; attempt 2 finished %v after Postgres was back",
				last.Sub(cutAt).Round(time.Millisecond), time.Since(restoredAt).Round(time.Millisecond))
			// The attempt that wins is a later one than the attempt the outage cut: attempt 2 when
			// nothing else happened, 3 on a loaded machine where attempt 1's 2-s lease ran out before
			// the cut (its renewals timed out) and attempt 2 was the one the outage cut.
			r := c.turn(id)
			require.GreaterOrEqual(t, r.Attempt, 2, "an attempt after the outage wins")
			waitTerminalEvents(t, c.env, session, id)
			requireFencedStream(t, readStream(t, c.env, session), id, "turn.completed", r.Attempt)
			require.Equal(t, []historyMsg{{1, id, "user"}, {2, id, "assistant"}}, history(t, c.env, session))
		})
	}
}

// streamTime is the Redis server time at which a stream entry was added.
func streamTime(t *testing.T, id string) time.Time {
	t.Helper()
	ms, _, _ := strings.Cut(id, "-")
	v, err := strconv.ParseInt(ms, 10, 64)
	require.NoError(t, err)
	return time.UnixMilli(v)
}
