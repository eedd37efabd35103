package peer

import (
	"context"
	"crypto/sha256"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/turnstile-run/turnstile/pkg/config"
)

func TestCrossing(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t1 := t0.Add(100 * time.Millisecond)
	for _, c := range []struct {
		target, k0, k1 int
		want           time.Duration
	}{
		{target: 10, k0: 0, k1: 50, want: 20 * time.Millisecond},
		{target: 90, k0: 50, k1: 100, want: 80 * time.Millisecond},
		{target: 100, k0: 50, k1: 100, want: 100 * time.Millisecond},
		{target: 60, k0: 60, k1: 60, want: 100 * time.Millisecond}, // no growth: the later poll
	} {
		if got := at(t0, t1, fraction(c.target, c.k0, c.k1)).Sub(t0); got != c.want {
			t.Errorf("crossing(%d, %d..%d) = %v, want %v", c.target, c.k0, c.k1, got, c.want)
		}
	}
}

func TestParseStat(t *testing.T) {
	// A command name with a space and a parenthesis, as proc(5) allows.
	line := []byte("4242 (redis-server) S 1 4242 4242 0 -1 4194560 1 0 0 0 700 300 20 5 20 0 5 0 100 1000 10")
	comm, ticks, ok := parseStat(line)
	if !ok || comm != "redis-server" || ticks != 1025 {
		t.Fatalf("parseStat = %q, %d, %v; want redis-server, 1025, true", comm, ticks, ok)
	}
	comm, _, ok = parseStat([]byte("7 (odd) name)) R 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15"))
	if !ok || comm != "odd) name)" {
		t.Fatalf("name with parentheses: %q, %v", comm, ok)
	}
	if _, _, ok := parseStat([]byte("9 (short) R 1 2")); ok {
		t.Fatal("a short line was read")
	}
}

func TestPerJob(t *testing.T) {
	a := cpuTimes{postgres: time.Second, redis: 2 * time.Second, self: 3 * time.Second, hasPostgres: true}
	b := cpuTimes{postgres: 3 * time.Second, redis: 2 * time.Second, self: 4 * time.Second, hasPostgres: true}
	mid := between(a, b, 0.25)
	if mid.postgres != 1500*time.Millisecond || mid.self != 3250*time.Millisecond || !mid.hasPostgres || mid.hasRedis {
		t.Fatalf("between = %+v", mid)
	}
	got := perJob(a, b, 1000)
	if got.Postgres == nil || *got.Postgres != 2000 || got.Process != 1000 || got.Redis != nil {
		t.Fatalf("perJob = %+v (postgres %v): want postgres 2000 µs, process 1000 µs, no redis", got, got.Postgres)
	}
}

// TestReadCPU checks that a cpuReader sees this process's CPU and, when the tests' Postgres runs on this
// machine, the Postgres server's: a query that makes the server work moves it.
func TestReadCPU(t *testing.T) {
	cpus := newCPUReader()
	before := cpus.read()
	buf := make([]byte, 1<<20)
	for range 20 {
		sum := sha256.Sum256(buf)
		buf[0] = sum[0]
	}
	if after := cpus.read(); after.self <= before.self {
		t.Fatalf("own CPU did not move: %v then %v", before.self, after.self)
	}
	url := os.Getenv("TURNSTILE_DATABASE_URL")
	if url == "" {
		url = config.Default().DatabaseURL
	}
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "127.0.0.1" && cfg.Host != "localhost" && !strings.HasPrefix(cfg.Host, "/") {
		t.Logf("Postgres at %s is not this machine's: its CPU is not read", cfg.Host)
		return
	}
	conn, err := pgx.ConnectConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	before = cpus.read()
	if _, err := conn.Exec(context.Background(), "SELECT count(*) FROM generate_series(1, 3000000)"); err != nil {
		t.Fatal(err)
	}
	after := cpus.read()
	if !before.hasPostgres || !after.hasPostgres || after.postgres <= before.postgres {
		t.Fatalf("the local Postgres's CPU was not read: %+v then %+v", before, after)
	}
}
