package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/kafka"
	"github.com/turnstile-run/turnstile/pkg/logging"
	"github.com/turnstile-run/turnstile/pkg/postgres"
)

// Env is one test's isolated environment.
type Env struct {
	// Config points every role at this environment; tests adjust it before starting roles.
	Config config.Config
	// Broker is the embedded cluster, nil when a real broker is used.
	Broker *kafka.Broker
	Pool   *pgxpool.Pool
	Redis  redis.UniversalClient
	// RedisServer is the test's own redis-server when Options.OwnRedis asked for one, else nil.
	RedisServer *RedisServer
	Log         *slog.Logger
	ID          string
}

// Options tune New.
type Options struct {
	// Partitions of the turns topic. Defaults to 4.
	Partitions int
	// Brokers in the kfake cluster. Defaults to 1.
	Brokers int
	// OwnRedis starts a redis-server for this test alone (Env.RedisServer) instead of using the
	// shared one, for tests that flush, kill or restart Redis.
	OwnRedis bool
}

// New prepares an environment and registers its cleanup.
func New(t testing.TB, opts Options) *Env {
	t.Helper()
	if opts.Partitions == 0 {
		opts.Partitions = 4
	}
	id := "t" + RandomHex(6)
	cfg := config.Default()
	cfg.Roles = "intake,worker,gateway"
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.InstanceID = id + "-main"
	cfg.Partitions = opts.Partitions
	cfg.KeyPrefix = "ts-" + id
	cfg.DatabaseSchema = id
	// A worker's registry snapshots on disk are the test's own: the default directory is shared by
	// every test on the machine, and another test's copy names replicas that are gone.
	cfg.Registry.SnapshotDir = t.TempDir()
	if u := os.Getenv("TURNSTILE_DATABASE_URL"); u != "" {
		cfg.DatabaseURL = u
	}
	if u := os.Getenv("TURNSTILE_REDIS_URL"); u != "" {
		cfg.RedisURL = u
	}
	if a := os.Getenv("TURNSTILE_REDIS_CLUSTER_ADDRS"); a != "" {
		cfg.RedisClusterAddrs = a
	}
	var own *RedisServer
	if opts.OwnRedis {
		own = StartRedis(t)
		cfg.RedisURL, cfg.RedisClusterAddrs = own.URL(), ""
	}
	// Tenant quotas are for the tests that test them; everything else posts as fast as it likes.
	cfg.Intake.TenantRate, cfg.Intake.TenantBurst, cfg.Intake.MaxQueuedTurns = 1_000_000, 1_000_000, 100_000_000
	cfg.DemoDelay = 2 * time.Millisecond
	cfg.LeaseTTL = 2 * time.Second
	cfg.Heartbeat = 250 * time.Millisecond
	cfg.KeepAlive = time.Second
	cfg.DrainTimeout = 5 * time.Second
	cfg.ShutdownTimeout = 20 * time.Second

	log := TestLogger(t)
	env := &Env{Config: cfg, Log: log, ID: id, RedisServer: own}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	if brokers := os.Getenv("TURNSTILE_KAFKA_BROKERS"); brokers != "" {
		env.Config.KafkaBrokers = brokers
		env.Config.Topic = "turns-" + id
		env.Config.DLQTopic = "turns-" + id + ".dlq"
		env.Config.ConsumerGroup = "workers-" + id
		if err := kafka.EnsureTopics(ctx, env.Config.BrokerList(), int32(opts.Partitions), env.Config.Topic, env.Config.DLQTopic); err != nil {
			t.Fatalf("testenv: create topics on %s: %v", brokers, err)
		}
	} else {
		env.Broker = kafka.NewBroker(log, "127.0.0.1:0", opts.Brokers, int32(opts.Partitions), cfg.Topic, cfg.DLQTopic)
		if err := env.Broker.Start(ctx); err != nil {
			t.Fatalf("testenv: %v", err)
		}
		t.Cleanup(func() { _ = env.Broker.Stop(context.Background()) })
		env.Config.KafkaBrokers = strings.Join(env.Broker.Addrs(), ",")
	}

	pool, err := postgres.NewPool(ctx, cfg.DatabaseURL, postgres.Options{Schema: cfg.DatabaseSchema})
	if err != nil {
		t.Fatalf("testenv: postgres (is it running? see .ci/run): %v", err)
	}
	if _, err := postgres.Migrate(ctx, pool); err != nil {
		pool.Close()
		t.Fatalf("testenv: %v", err)
	}
	env.Pool = pool
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		pool.Close()
		dropSchema(ctx, cfg.DatabaseURL, cfg.DatabaseSchema)
	})

	rdb, err := newRedis(env.Config)
	if err != nil {
		t.Fatalf("testenv: redis: %v", err)
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("testenv: redis (is it running? see .ci/run): %v", err)
	}
	env.Redis = rdb
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		DeletePrefix(ctx, rdb, cfg.KeyPrefix)
		_ = rdb.Close()
	})
	return env
}

// KfakeCluster returns the embedded cluster for fault injection, or nil with a real broker.
func (e *Env) KfakeCluster() *kfake.Cluster {
	if e.Broker == nil {
		return nil
	}
	return e.Broker.Cluster()
}

// Environ renders the configuration as TURNSTILE_* variables, for starting roles as child processes.
func (e *Env) Environ(roles, httpAddr, instance string) []string {
	c := e.Config
	kv := map[string]string{
		"TURNSTILE_ROLES":               roles,
		"TURNSTILE_HTTP_ADDR":           httpAddr,
		"TURNSTILE_INSTANCE_ID":         instance,
		"TURNSTILE_DATABASE_URL":        c.DatabaseURL,
		"TURNSTILE_DATABASE_SCHEMA":     c.DatabaseSchema,
		"TURNSTILE_REDIS_URL":           c.RedisURL,
		"TURNSTILE_REDIS_CLUSTER_ADDRS": c.RedisClusterAddrs,
		"TURNSTILE_KEY_PREFIX":          c.KeyPrefix,
		"TURNSTILE_KAFKA_BROKERS":       c.KafkaBrokers,
		"TURNSTILE_KAFKA_TOPIC":         c.Topic,
		"TURNSTILE_KAFKA_DLQ_TOPIC":     c.DLQTopic,
		"TURNSTILE_KAFKA_GROUP":         c.ConsumerGroup,
		"TURNSTILE_KAFKA_PARTITIONS":    itoa(c.Partitions),
		"TURNSTILE_LEASE_TTL":           c.LeaseTTL.String(),
		"TURNSTILE_HEARTBEAT_INTERVAL":  c.Heartbeat.String(),
		"TURNSTILE_DEMO_DELAY":          c.DemoDelay.String(),
		"TURNSTILE_DEMO_FAULTS":         c.DemoFaults,
		"TURNSTILE_KEEPALIVE":           c.KeepAlive.String(),
		"TURNSTILE_DRAIN_TIMEOUT":       c.DrainTimeout.String(),
		"TURNSTILE_MAX_ATTEMPTS":        itoa(c.MaxAttempts),
		"TURNSTILE_WORKER_MAX_INFLIGHT": itoa(c.MaxInflight),
		"TURNSTILE_LOG_FORMAT":          "json",
		"TURNSTILE_TENANT_RATE":         itoa(c.Intake.TenantRate),
		"TURNSTILE_TENANT_BURST":        itoa(c.Intake.TenantBurst),
		"TURNSTILE_MAX_QUEUED_TURNS":    itoa(c.Intake.MaxQueuedTurns),
	}
	out := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for k, v := range kv {
		if v != "" {
			out = append(out, k+"="+v)
		}
	}
	return out
}

func itoa(i int) string { return strconv.Itoa(i) }

func newRedis(cfg config.Config) (redis.UniversalClient, error) {
	if addrs := cfg.RedisClusterList(); len(addrs) > 0 {
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs}), nil
	}
	o, err := redis.ParseURL(cfg.RedisURL)
	if err != nil {
		return nil, err
	}
	return redis.NewClient(o), nil
}

func dropSchema(ctx context.Context, url, schema string) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return
	}
	defer func() { _ = conn.Close(ctx) }()
	_, _ = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
}

// DeletePrefix deletes every key under prefix (on every master of a cluster).
func DeletePrefix(ctx context.Context, rdb redis.UniversalClient, prefix string) {
	del := func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, prefix+":*", 500).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
		return iter.Err()
	}
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		_ = c.ForEachMaster(ctx, del)
	case *redis.Client:
		_ = del(ctx, c)
	}
}

// RandomHex returns n random bytes as hex.
func RandomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// TestLogger returns a logger writing to the test log, or discarding unless TURNSTILE_TEST_LOG is
// set, since the end-to-end tests log a great deal.
func TestLogger(t testing.TB) *slog.Logger {
	if os.Getenv("TURNSTILE_TEST_LOG") == "" {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return logging.New(testWriter{t}, "text", "debug")
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// WaitFor polls cond until it is true or timeout passes. It is for conditions on external state
// (rows in Postgres, entries in Redis) that have no signal to wait on; the poll interval is short and
// the timeout generous, so it synchronises rather than guesses.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
