package peer

import (
	"context"
	"crypto/sha256"
	"errors"
	"maps"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/testenv"
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

// TestCPUAt checks the CPU times at a moment interpolated between the readings around it, and the
// first or last reading's outside them.
func TestCPUAt(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	sample := func(ms int, self time.Duration) cpuSample {
		return cpuSample{t0.Add(time.Duration(ms) * time.Millisecond), cpuTimes{self: self, postgres: 2 * self, hasPostgres: true}}
	}
	samples := []cpuSample{sample(0, 0), sample(50, 100*time.Millisecond), sample(100, 300*time.Millisecond)}
	for _, c := range []struct {
		ms   int
		want time.Duration
	}{
		{-10, 0},
		{0, 0},
		{25, 50 * time.Millisecond},
		{50, 100 * time.Millisecond},
		{75, 200 * time.Millisecond},
		{100, 300 * time.Millisecond},
		{130, 300 * time.Millisecond},
	} {
		got := cpuAt(samples, t0.Add(time.Duration(c.ms)*time.Millisecond))
		if got.self != c.want || got.postgres != 2*c.want || !got.hasPostgres {
			t.Errorf("cpuAt(%d ms) = %+v, want self %v", c.ms, got, c.want)
		}
	}
}

// TestDrainConfirms checks that drain ends with Postgres's word on the jobs finished: a count that
// reached n is not believed unless Postgres holds n too.
func TestDrainConfirms(t *testing.T) {
	t.Parallel()
	const n = 100
	// rising is an in-process count that reads 0, n/2, then n on successive polls.
	rising := func() func(context.Context) (int, error) {
		polls := 0
		return func(context.Context) (int, error) {
			polls++
			return min(n, (polls-1)*n/2), nil
		}
	}
	holds := func(k int, err error) func(context.Context) (int, error) {
		return func(context.Context) (int, error) { return k, err }
	}
	t.Run("Agrees", func(t *testing.T) {
		t.Parallel()
		d, err := drain(context.Background(), n, time.Now(), rising(), holds(n, nil))
		if err != nil {
			t.Fatal(err)
		}
		if d.seconds <= 0 || d.total < d.seconds {
			t.Fatalf("drained = %+v: want a positive 10%%-90%% time within the total", d)
		}
	})
	t.Run("OverReported", func(t *testing.T) {
		t.Parallel()
		_, err := drain(context.Background(), n, time.Now(), rising(), holds(n-1, nil))
		if err == nil || !strings.Contains(err.Error(), "postgres holds 99") {
			t.Fatalf("err = %v, want the in-process count's over-report", err)
		}
	})
	t.Run("ConfirmFails", func(t *testing.T) {
		t.Parallel()
		boom := errors.New("boom")
		if _, err := drain(context.Background(), n, time.Now(), rising(), holds(0, boom)); !errors.Is(err, boom) {
			t.Fatalf("err = %v, want the confirmation's error", err)
		}
	})
}

// TestSucceeded checks that the succeeded attempts are summed over every worker's registry and
// that other outcomes are left out.
func TestSucceeded(t *testing.T) {
	t.Parallel()
	worker := func(succeeded, failed float64) prometheus.Gatherer {
		reg := prometheus.NewRegistry()
		attempts := prometheus.NewCounterVec(prometheus.CounterOpts{Name: attemptsMetric}, []string{"outcome"})
		reg.MustRegister(attempts, prometheus.NewCounter(prometheus.CounterOpts{Name: "unrelated_total"}))
		attempts.WithLabelValues("succeeded").Add(succeeded)
		attempts.WithLabelValues("failed").Add(failed)
		return reg
	}
	got, err := succeeded([]prometheus.Gatherer{worker(3, 2), worker(4, 0)})
	if err != nil || got != 7 {
		t.Fatalf("succeeded = %d, %v; want 7", got, err)
	}
}

// TestMeanBatches checks that batch sizes are averaged per kind over every worker's registry.
func TestMeanBatches(t *testing.T) {
	t.Parallel()
	worker := func(claims ...float64) prometheus.Gatherer {
		reg := prometheus.NewRegistry()
		size := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: batchMetric}, []string{"kind"})
		reg.MustRegister(size)
		for _, n := range claims {
			size.WithLabelValues("claim").Observe(n)
		}
		size.WithLabelValues("publish").Observe(3)
		return reg
	}
	got, err := meanBatches([]prometheus.Gatherer{worker(10, 20), worker(60)})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]float64{"claim": 30, "publish": 3}; !maps.Equal(got, want) {
		t.Fatalf("meanBatches = %v, want %v", got, want)
	}
}

// TestRun runs every side with a few hundred jobs on the real services, so each side's in-process
// count reaches the jobs queued and Postgres agrees with it.
func TestRun(t *testing.T) {
	t.Parallel()
	base := testBase()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := Run(ctx, Options{Jobs: 300, RiverWorkers: 50, Base: base, Log: testenv.TestLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []Result{c.Turnstile, c.River, c.Floor} {
		if r.Jobs != 300 || r.PerSec <= 0 || r.Total <= 0 {
			t.Errorf("%s: %+v", r.System, r)
		}
	}
	for _, kind := range []string{"claim", "complete", "publish"} {
		if c.Turnstile.MeanBatch[kind] < 1 {
			t.Errorf("turnstile's mean %s batch: %v", kind, c.Turnstile.MeanBatch)
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

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
	} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
	in := []float64{2, 1}
	median(in)
	if in[0] != 2 {
		t.Error("median sorted its argument")
	}
}

// TestSummarize checks that a series' ratios are the medians of each round's own ratio, not the
// ratio of the median rates, and that a CPU figure some round lacks has no median.
func TestSummarize(t *testing.T) {
	pg := func(v float64) *float64 { return &v }
	round := func(ts, rv, fl float64, tsPG *float64) Comparison {
		return Comparison{
			Turnstile: Result{PerSec: ts, CPU: CPUPerJob{Postgres: tsPG, Redis: pg(ts / 100), Process: ts / 10}},
			River:     Result{PerSec: rv, CPU: CPUPerJob{Postgres: pg(rv / 100), Process: rv / 10}},
			Floor:     Result{PerSec: fl},
			Ratio:     ts / rv, TurnstileOverFloor: ts / fl, FloorOverRiver: fl / rv,
		}
	}
	m := summarize([]Comparison{
		round(100, 200, 400, pg(1)),
		round(300, 1000, 600, pg(3)),
		round(200, 250, 500, pg(2)),
	})
	if m.Turnstile.PerSec != 200 || m.River.PerSec != 250 || m.Floor.PerSec != 500 {
		t.Errorf("median rates %+v %+v %+v", m.Turnstile, m.River, m.Floor)
	}
	// The rounds' ratios are 0.5, 0.3 and 0.8: the median is 0.5, where the median rates give 0.8.
	if m.TurnstileOverRiver != 0.5 {
		t.Errorf("turnstile/river = %v, want 0.5 (median of the rounds' ratios)", m.TurnstileOverRiver)
	}
	if m.FloorOverRiver != 2 || m.TurnstileOverFloor != 0.4 {
		t.Errorf("floor/river %v, turnstile/floor %v", m.FloorOverRiver, m.TurnstileOverFloor)
	}
	if m.Turnstile.CPU.Postgres == nil || *m.Turnstile.CPU.Postgres != 2 || m.Turnstile.CPU.Process != 20 {
		t.Errorf("turnstile cpu %+v", m.Turnstile.CPU)
	}
	if m.River.CPU.Redis != nil {
		t.Errorf("river redis median %v: no round had it", *m.River.CPU.Redis)
	}
	m = summarize([]Comparison{round(100, 200, 400, pg(1)), round(300, 1000, 600, nil)})
	if m.Turnstile.CPU.Postgres != nil {
		t.Error("a Postgres median although one round lacked the figure")
	}
}

// TestRunRounds runs two short rounds: the series holds both and its medians come from them.
func TestRunRounds(t *testing.T) {
	t.Parallel()
	base := testBase()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := RunRounds(ctx, Options{Jobs: 100}, 0); err == nil {
		t.Fatal("zero rounds accepted")
	}
	s, err := RunRounds(ctx, Options{Jobs: 100, RiverWorkers: 50, Base: base, Log: testenv.TestLogger(t)}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Rounds) != 2 {
		t.Fatalf("%d rounds", len(s.Rounds))
	}
	want := (s.Rounds[0].Ratio + s.Rounds[1].Ratio) / 2
	if s.Median.TurnstileOverRiver != want || s.Median.Turnstile.PerSec <= 0 {
		t.Fatalf("median %+v, want turnstile/river %v", s.Median, want)
	}
}

// testBase is the stack's default configuration pointed at the test Postgres and Redis.
func testBase() config.Config {
	base := config.Default()
	if u := os.Getenv("TURNSTILE_DATABASE_URL"); u != "" {
		base.DatabaseURL = u
	}
	if u := os.Getenv("TURNSTILE_REDIS_URL"); u != "" {
		base.RedisURL = u
	}
	return base
}

// TestRecordQueued writes turns as intake records them: each a queued row, each session's owner
// once; and refuses to record turns that already have rows, since the drain would then not start
// from queued rows.
func TestRecordQueued(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 1})
	ctx := context.Background()
	envs := turnEnvelopes(0, 5, 2, time.Now())
	if err := recordQueued(ctx, env.Pool, envs); err != nil {
		t.Fatal(err)
	}
	var queued, sessions int
	if err := env.Pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'queued' AND tenant = 'default' AND attempt = 0),
		(SELECT count(*) FROM sessions WHERE tenant = 'default') FROM turns`).Scan(&queued, &sessions); err != nil {
		t.Fatal(err)
	}
	if queued != 5 || sessions != 2 {
		t.Fatalf("%d queued turns and %d sessions, want 5 and 2", queued, sessions)
	}
	if err := recordQueued(ctx, env.Pool, envs[:1]); err == nil || !strings.Contains(err.Error(), "0 of 1 rows") {
		t.Fatalf("recording a turn again: %v, want 0 of 1 rows inserted", err)
	}
}

// TestTurnstileRecordQueued drains turns whose queued rows were recorded first: every claim takes
// over an existing row, and the drain still confirms every turn succeeded in Postgres.
func TestTurnstileRecordQueued(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := Turnstile(ctx, Options{Jobs: 300, Sessions: 300, RecordQueued: true, Base: testBase(), Log: testenv.TestLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if r.Jobs != 300 || r.PerSec <= 0 || !strings.Contains(r.Notes, "-record-queued") {
		t.Fatalf("%+v", r)
	}
}
