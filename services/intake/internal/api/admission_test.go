package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/pkg/postgres"
)

const turnBody = `{"input":{"text":"hello"}}`

func retryAfter(t testing.TB, r response) int {
	t.Helper()
	n, err := strconv.Atoi(r.Header.Get("Retry-After"))
	require.NoError(t, err, "Retry-After must be whole seconds")
	return n
}

// TestAdmissionBacklog refuses with 503 while the backlog is older than the limit, and when the
// request's deadline cannot be met at the current backlog age; nothing reaches Kafka.
func TestAdmissionBacklog(t *testing.T) {
	t.Parallel()
	b := setup(t, options{cfg: func(c *Config) { c.MaxBacklogAge = 30 * time.Second }})

	b.backlog.Store(int64(31 * time.Second))
	seen := map[int]bool{}
	for range 20 {
		resp := postTurn(t, b.srv.URL, "bk", turnBody, nil)
		require.Equal(t, http.StatusServiceUnavailable, resp.Status)
		require.Equal(t, httpx.ProblemBacklog.Name, resp.ProblemType(t))
		ra := retryAfter(t, resp)
		require.GreaterOrEqual(t, ra, 1)
		require.LessOrEqual(t, ra, 3)
		seen[ra] = true
	}
	require.Greater(t, len(seen), 1, "Retry-After must be jittered")

	b.backlog.Store(int64(10 * time.Second))
	soon := strconv.FormatInt(time.Now().Add(5*time.Second).UnixMilli(), 10)
	resp := postTurn(t, b.srv.URL, "bk", turnBody, map[string]string{"X-Deadline-Epoch-Ms": soon})
	require.Equal(t, http.StatusServiceUnavailable, resp.Status)
	require.Equal(t, httpx.ProblemDeadlineUnreach.Name, resp.ProblemType(t))
	require.Zero(t, b.recordsInKafka(t))

	// Under the limit, with a reachable deadline, the same requests are accepted.
	later := strconv.FormatInt(time.Now().Add(time.Minute).UnixMilli(), 10)
	require.Equal(t, http.StatusAccepted, postTurn(t, b.srv.URL, "bk", turnBody, map[string]string{"X-Deadline-Epoch-Ms": later}).Status)
}

// TestAdmissionNoBacklogMonitor admits when the backlog age is unknown (no monitor wired).
func TestAdmissionNoBacklogMonitor(t *testing.T) {
	t.Parallel()
	b := setup(t, options{cfg: func(c *Config) { c.BacklogAge = nil }})
	b.backlog.Store(int64(time.Hour)) // not consulted
	require.Equal(t, http.StatusAccepted, postTurn(t, b.srv.URL, "bk", turnBody, nil).Status)
}

// TestAdmissionKafkaUnavailable makes the broker fail every produce request: intake answers 503
// with Retry-After within the produce timeout, then accepts again once the broker recovers.
func TestAdmissionKafkaUnavailable(t *testing.T) {
	t.Parallel()
	const produceTimeout = 750 * time.Millisecond
	b := setup(t, options{cfg: func(c *Config) { c.ProduceTimeout = produceTimeout }})
	// Warm up: metadata and a first successful produce.
	require.Equal(t, http.StatusAccepted, postTurn(t, b.srv.URL, "kf", turnBody, nil).Status)

	var broken atomic.Bool
	broken.Store(true)
	var hit atomic.Int64
	cluster := b.env.KfakeCluster()
	require.NotNil(t, cluster)
	cluster.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		if !broken.Load() {
			cluster.DropControl()
			return nil, nil, false
		}
		hit.Add(1)
		cluster.KeepControl()
		return nil, errors.New("injected: broker unavailable"), true
	})
	start := time.Now()
	resp := postTurn(t, b.srv.URL, "kf", turnBody, map[string]string{"Idempotency-Key": "k"})
	elapsed := time.Since(start)
	require.Equal(t, http.StatusServiceUnavailable, resp.Status, string(resp.Body))
	require.Equal(t, httpx.ProblemKafkaUnavail.Name, resp.ProblemType(t))
	require.GreaterOrEqual(t, retryAfter(t, resp), 1)
	require.Positive(t, hit.Load(), "the broker must have been asked")
	require.GreaterOrEqual(t, elapsed, produceTimeout)
	require.Less(t, elapsed, produceTimeout+2*time.Second, "the refusal must come at the produce timeout")

	broken.Store(false)
	// The client's retry with the same key succeeds once Kafka is back.
	testWaitAccepted(t, b, "kf", map[string]string{"Idempotency-Key": "k"})
}

func testWaitAccepted(t *testing.T, b *bundle, session string, hdr map[string]string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp := postTurn(t, b.srv.URL, session, turnBody, hdr)
		if resp.Status == http.StatusAccepted {
			return
		}
		require.Equal(t, http.StatusServiceUnavailable, resp.Status)
		require.True(t, time.Now().Before(deadline), "intake did not recover")
	}
}

// TestAdmissionTenantRate puts a tenant over its GCRA rate: 429 with Retry-After, nothing produced.
func TestAdmissionTenantRate(t *testing.T) {
	t.Parallel()
	// Redis answers within the test's patience however busy the machine: a check that timed out
	// would fail open (TestStaticStability) and admit more than the rate.
	b := setup(t, options{cfg: func(c *Config) { c.TenantRate, c.TenantBurst, c.RedisTimeout = 1, 3, 30*time.Second }})
	accepted, limited := 0, 0
	var last response
	for range 8 {
		resp := postTurn(t, b.srv.URL, "rate", turnBody, nil)
		switch resp.Status {
		case http.StatusAccepted:
			accepted++
		case http.StatusTooManyRequests:
			limited++
			last = resp
		default:
			t.Fatalf("unexpected %d %s", resp.Status, resp.Body)
		}
	}
	require.LessOrEqual(t, accepted, 4, "burst 3 (+1 refilled at most)")
	require.GreaterOrEqual(t, limited, 4)
	require.Equal(t, httpx.ProblemRateLimited.Name, last.ProblemType(t))
	require.GreaterOrEqual(t, retryAfter(t, last), 1)
	require.EqualValues(t, accepted, b.recordsInKafka(t))
}

// TestAdmissionQueuedQuota refuses a tenant that has its maximum of queued turns.
func TestAdmissionQueuedQuota(t *testing.T) {
	t.Parallel()
	// The count answers within the test's patience however busy the machine: a count that timed
	// out would fail open (TestStaticStability) and admit the turn.
	b := setup(t, options{cfg: func(c *Config) { c.MaxQueuedTurns, c.CheckTimeout = 2, 30*time.Second }})
	ctx := context.Background()
	_, err := b.env.Pool.Exec(ctx, `INSERT INTO turns (turn_id, session_id, tenant, status, accepted_at)
		VALUES (gen_random_uuid(), 'q1', 'default', 'queued', now()), (gen_random_uuid(), 'q2', 'default', 'queued', now())`)
	require.NoError(t, err)
	resp := postTurn(t, b.srv.URL, "q3", turnBody, nil)
	require.Equal(t, http.StatusTooManyRequests, resp.Status, string(resp.Body))
	require.Equal(t, httpx.ProblemQueueQuota.Name, resp.ProblemType(t))
	require.GreaterOrEqual(t, retryAfter(t, resp), 1)
	require.Zero(t, b.recordsInKafka(t))
}

// TestStaticStability accepts turns while Redis and Postgres are unreachable: the quotas and the
// idempotency record fail open and are counted.
func TestStaticStability(t *testing.T) {
	t.Parallel()
	deadRedis := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	t.Cleanup(func() { _ = deadRedis.Close() })
	t.Run("RedisDown", func(t *testing.T) {
		t.Parallel()
		b := setup(t, options{redis: deadRedis})
		for range 3 {
			require.Equal(t, http.StatusAccepted, postTurn(t, b.srv.URL, "rd", turnBody, map[string]string{"Idempotency-Key": "x"}).Status)
		}
		require.EqualValues(t, 3, b.failOpen("rate"))
		require.EqualValues(t, 3, b.failOpen("idempotency"))
		require.EqualValues(t, 3, b.recordsInKafka(t))
	})
	t.Run("PostgresAndRedisDown", func(t *testing.T) {
		t.Parallel()
		deadPG, err := postgres.NewLazyPool(context.Background(), "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=1", postgres.Options{})
		require.NoError(t, err)
		t.Cleanup(deadPG.Close)
		b := setup(t, options{redis: deadRedis, pool: deadPG})
		start := time.Now()
		resp := postTurn(t, b.srv.URL, "pd", `{"input":{"text":"x"},"multitask":"reject"}`, nil)
		require.Equal(t, http.StatusAccepted, resp.Status, string(resp.Body))
		require.Less(t, time.Since(start), 5*time.Second)
		require.EqualValues(t, 1, b.failOpen("queued_quota"))
		require.EqualValues(t, 1, b.recordsInKafka(t))
		// Status needs Postgres: an honest 503, not a 404.
		a := accepted(t, resp)
		got := do(t, b.srv.URL, request{Method: http.MethodGet, Path: "/v1/turns/" + a.TurnID})
		require.Equal(t, http.StatusServiceUnavailable, got.Status)
		require.Equal(t, httpx.ProblemStoreUnavail.Name, got.ProblemType(t))
	})
}

// scriptsInFlight records the most Lua scripts (GCRA limiter calls) a Redis client had in flight
// at once.
type scriptsInFlight struct{ now, max, total atomic.Int64 }

func (c *scriptsInFlight) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *scriptsInFlight) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name != "evalsha" && name != "eval" {
			return next(ctx, cmd)
		}
		c.total.Add(1)
		n := c.now.Add(1)
		defer c.now.Add(-1)
		for {
			if m := c.max.Load(); n <= m || c.max.CompareAndSwap(m, n) {
				break
			}
		}
		return next(ctx, cmd)
	}
}

func (c *scriptsInFlight) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestAdmissionRateLeaseSingleFlight sends a burst of concurrent turns for one tenant: one request
// at a time asks Redis for the tenant's next lease of tokens and the others wait for it, instead of
// every request that found the lease empty asking at once.
func TestAdmissionRateLeaseSingleFlight(t *testing.T) {
	t.Parallel()
	b := setup(t, options{cfg: func(c *Config) { c.TenantRate, c.TenantBurst = 6400, 6400 }}) // leases of 64
	hook := &scriptsInFlight{}
	b.env.Redis.AddHook(hook)
	const n = 48
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			resp := postTurn(t, b.srv.URL, "lease-"+strconv.Itoa(i), turnBody, nil)
			require.Equal(t, http.StatusAccepted, resp.Status, string(resp.Body))
		})
	}
	wg.Wait()
	require.Positive(t, hook.total.Load())
	require.EqualValues(t, 1, hook.max.Load(), "rate-limit calls in flight at once")
	require.Zero(t, b.failOpen("rate"))
}

// TestRefusalWritesNothing: a turn refused for its tenant's rate or queued-turn quota, or for
// capacity, leaves no session row behind.
func TestRefusalWritesNothing(t *testing.T) {
	t.Parallel()
	sessions := func(t *testing.T, b *bundle, id string) int {
		t.Helper()
		var n int
		require.NoError(t, b.env.Pool.QueryRow(context.Background(), `SELECT count(*) FROM sessions WHERE session_id = $1`, id).Scan(&n))
		return n
	}
	t.Run("RateLimited", func(t *testing.T) {
		t.Parallel()
		b := setup(t, options{cfg: func(c *Config) { c.TenantRate, c.TenantBurst = 1, 1 }})
		require.Equal(t, http.StatusAccepted, postTurn(t, b.srv.URL, "first", turnBody, nil).Status)
		resp := postTurn(t, b.srv.URL, "refused", turnBody, nil)
		require.Equal(t, http.StatusTooManyRequests, resp.Status, string(resp.Body))
		require.Zero(t, sessions(t, b, "refused"))
	})
	t.Run("QueuedQuota", func(t *testing.T) {
		t.Parallel()
		b := setup(t, options{cfg: func(c *Config) { c.MaxQueuedTurns = 1 }})
		_, err := b.env.Pool.Exec(context.Background(), `INSERT INTO turns (turn_id, session_id, tenant, status, accepted_at)
			VALUES (gen_random_uuid(), 'q1', 'default', 'queued', now())`)
		require.NoError(t, err)
		resp := postTurn(t, b.srv.URL, "refused", turnBody, nil)
		require.Equal(t, http.StatusTooManyRequests, resp.Status, string(resp.Body))
		require.Zero(t, sessions(t, b, "refused"))
	})
	t.Run("Backlog", func(t *testing.T) {
		t.Parallel()
		b := setup(t, options{})
		b.backlog.Store(int64(2 * time.Minute))
		resp := postTurn(t, b.srv.URL, "refused", turnBody, nil)
		require.Equal(t, http.StatusServiceUnavailable, resp.Status, string(resp.Body))
		require.Zero(t, sessions(t, b, "refused"))
	})
}

// TestRateKeyUnderPrefix: the rate limiter's Redis key starts with TURNSTILE_KEY_PREFIX, as every
// other key does (redis_rate alone puts "rate:" first).
func TestRateKeyUnderPrefix(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	require.Equal(t, http.StatusAccepted, postTurn(t, b.srv.URL, "rk", turnBody, nil).Status)
	ctx := context.Background()
	prefix := b.env.Config.KeyPrefix
	n, err := b.env.Redis.Exists(ctx, "rate:"+prefix+":tenant:default", "rate:"+rateKey(prefix, "default")).Result()
	require.NoError(t, err)
	require.Zero(t, n, "a key outside the prefix")
	n, err = b.env.Redis.Exists(ctx, rateKey(prefix, "default")).Result()
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
}
