package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/streams"
	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// takeoverTarget is the p99 bound on the time from a worker's SIGKILL to the first event of each
// interrupted turn's retried attempt, with the platform's default settings.
const takeoverTarget = 20 * time.Second

// TestWorkerTakeover measures what a user gets when a worker dies mid-turn in split mode: one
// worker runs 40 long turns across all partitions, it is SIGKILLed, and a replacement (a new
// process under a new instance ID, as a new pod would be) starts at once. For every interrupted
// turn it takes the time from the kill to its retried attempt's first event in the session stream
// (turn.retrying, or any event of a later attempt) and requires the p99 within takeoverTarget.
//
// The group session timeout, the group heartbeat, the lease TTL and the lease heartbeat are the
// platform's defaults, not the short ones the other worker tests use: the figure is the one an
// operator who changed nothing sees. It is bounded below by the later of two waits: the group
// giving the dead member's partitions to the replacement (the session timeout) and the dead
// worker's leases expiring (the lease TTL after its last renewal), since the replacement's claim
// answers LEASED until then.
func TestWorkerTakeover(t *testing.T) {
	t.Parallel()
	const (
		sessions = 40
		// Long enough that every turn is still running at the kill and through the takeover.
		turnMs = 180_000
		tokens = 300
	)
	c := newCluster(t, clusterOptions{
		Partitions:  8,
		LeaseTTL:    config.LeaseTTLDefault,
		Heartbeat:   config.HeartbeatDefault,
		MaxInflight: sessions,
	})
	c.platformGroupTimeouts()
	c.startWorker("w1")

	names := make([]string, sessions)
	turns := make([]string, sessions)
	for s := range sessions {
		names[s] = fmt.Sprintf("takeover-%d", s)
		turns[s] = c.post(names[s], "a long turn", map[string]any{"demo": map[string]any{"duration_ms": turnMs, "tokens": tokens}})
	}
	for _, s := range names {
		waitFirstDeltas(t, c.env, s)
	}

	// The kill's moment on the Redis server's clock, the clock of the stream entry IDs compared
	// with it below.
	killedAt := redisNow(t, c.env)
	c.kill("w1")
	replacement := c.startWorker("w1")
	// The group assigns the dead member's partitions only once its session has timed out, seconds
	// after the replacement answers /healthz: until then the replacement is not ready and says why.
	// Its first reason is "waiting for kafka" until its first ping answers (a moment on a loaded
	// machine); the reason that matters here is the next one.
	var code int
	var body string
	testenv.WaitFor(t, 30*time.Second, "the replacement to reach Kafka", func() bool {
		code, body = readyz(t, replacement.Addr)
		return !strings.Contains(body, "waiting for kafka")
	})
	require.Equal(t, http.StatusServiceUnavailable, code, "the replacement is ready while it waits for its assignment: %s", body)
	require.Contains(t, body, "waiting for a group assignment", "the replacement's /readyz names what it waits for")

	firsts := make([]time.Time, sessions)
	testenv.WaitFor(t, 3*time.Minute, "every interrupted turn's retried attempt to publish", func() bool {
		return retriedFirsts(t, c.env, names, turns, firsts)
	})
	code, body = readyz(t, replacement.Addr)
	require.Equal(t, http.StatusOK, code, "the replacement runs the retried turns: %s", body)

	took := make([]time.Duration, sessions)
	for i, at := range firsts {
		took[i] = at.Sub(killedAt)
		require.Positive(t, took[i], "turn %s: its retried attempt published before the kill", turns[i])
	}
	slices.Sort(took)
	p50, p99 := percentile(took, 0.50), percentile(took, 0.99)
	t.Logf("takeover (SIGKILL to the retried attempt's first event, %d turns, session timeout %v, lease TTL %v): p50 %v, p99 %v, max %v",
		sessions, config.WorkerSessionTimeoutDefault, config.LeaseTTLDefault,
		p50.Round(time.Millisecond), p99.Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond))
	require.LessOrEqual(t, p99, takeoverTarget, "p99 takeover time")
}

// platformGroupTimeouts makes c's workers use the platform's default group session and rebalance
// timeouts instead of the short ones newCluster gives worker tests.
func (c *cluster) platformGroupTimeouts() {
	c.workerEnv = slices.DeleteFunc(c.workerEnv, func(kv string) bool {
		return strings.HasPrefix(kv, "TURNSTILE_WORKER_SESSION_TIMEOUT=") || strings.HasPrefix(kv, "TURNSTILE_WORKER_REBALANCE_TIMEOUT=")
	})
}

// readyz is the status and body of the /readyz answer of the process at addr.
func readyz(t *testing.T, addr string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/readyz")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// redisNow is the Redis server's clock.
func redisNow(t *testing.T, env *testenv.Env) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	now, err := env.Redis.Time(ctx).Result()
	require.NoError(t, err)
	return now
}

// retriedFirsts fills firsts[i] with the time of the first event of a later attempt than the first
// in the stream of session names[i] for turn turns[i], and reports whether every turn has one. A
// stream's newest entry is read first (one pipelined round trip for all pending sessions), and the
// whole stream only once that entry belongs to a later attempt.
func retriedFirsts(t *testing.T, env *testenv.Env, names, turns []string, firsts []time.Time) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pending := []int{}
	for i := range names {
		if firsts[i].IsZero() {
			pending = append(pending, i)
		}
	}
	pipe := env.Redis.Pipeline()
	newest := make([]*redis.XMessageSliceCmd, len(pending))
	for j, i := range pending {
		newest[j] = pipe.XRevRangeN(ctx, streams.KeysFor(env.Config.KeyPrefix, storeKey(names[i])).Events, "+", "-", 1)
	}
	_, err := pipe.Exec(ctx)
	require.NoError(t, err)
	done := true
	for j, i := range pending {
		msgs := newest[j].Val()
		if len(msgs) == 0 || entryAttempt(t, msgs[0]) < 2 {
			done = false
			continue
		}
		for _, e := range readStream(t, env, names[i]) {
			if e.TurnID == turns[i] && e.Attempt >= 2 {
				firsts[i] = entryTime(t, e.ID)
				break
			}
		}
		require.False(t, firsts[i].IsZero(), "turn %s: no event of a later attempt in its stream", turns[i])
	}
	return done
}

// entryAttempt is the attempt a stream entry's event names.
func entryAttempt(t *testing.T, m redis.XMessage) int {
	t.Helper()
	var d struct {
		Attempt int `json:"attempt"`
	}
	require.NoError(t, json.Unmarshal([]byte(fmt.Sprint(m.Values["data"])), &d))
	return d.Attempt
}

// entryTime is when Redis added a stream entry: the milliseconds part of its ID.
func entryTime(t *testing.T, id string) time.Time {
	t.Helper()
	ms, _, ok := strings.Cut(id, "-")
	require.True(t, ok, "stream entry ID %q", id)
	n, err := strconv.ParseInt(ms, 10, 64)
	require.NoError(t, err)
	return time.UnixMilli(n)
}

// percentile is the nearest-rank percentile p of sorted.
func percentile(sorted []time.Duration, p float64) time.Duration {
	rank := int(math.Ceil(p * float64(len(sorted))))
	return sorted[max(rank, 1)-1]
}
