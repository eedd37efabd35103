package integration

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/streams"
	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

// benchInt reads a positive integer from the environment, else def.
func benchInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// scrape returns the sum of every sample of a metric family on a /metrics page.
func scrape(t testing.TB, addr, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	sum := 0.0
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, name+" ") && !strings.HasPrefix(line, name+"{") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		require.NoError(t, err)
		sum += v
	}
	return sum
}

// redisClients counts the Redis connections named name (CLIENT LIST; the gateway process is
// given its own client name, since the Redis server is shared with other tests).
func redisClients(t testing.TB, rdb redis.UniversalClient, name string) int {
	t.Helper()
	list, err := rdb.ClientList(context.Background()).Result()
	require.NoError(t, err)
	return strings.Count(list, " name="+name+" ")
}

func pct(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(float64(len(sorted))*p))]
}

// fanout is one gateway process with its SSE clients.
type fanout struct {
	addr       string
	clientName string
	proc       *testenv.Process
	stop       context.CancelFunc
	readers    sync.WaitGroup
	mu         sync.Mutex
	lat        []time.Duration
	received   atomic.Int64
	openTime   time.Duration
}

// startFanout starts a gateway process (extra environment appended) and opens clients SSE streams
// spread evenly over sessions, each timing the events it receives.
func startFanout(b *testing.B, env *testenv.Env, ids []string, clients int, extra ...string) *fanout {
	b.Helper()
	f := &fanout{addr: testenv.FreeAddr(b), clientName: "bench-gw-" + testenv.RandomHex(4)}
	sep := "?"
	if strings.Contains(env.Config.RedisURL, "?") {
		sep = "&"
	}
	environ := append(env.Environ("gateway", f.addr, env.ID+"-gw"),
		"TURNSTILE_KEEPALIVE=15s", "TURNSTILE_GATEWAY_MAX_CONNECTIONS=100000",
		"TURNSTILE_REDIS_URL="+env.Config.RedisURL+sep+"client_name="+f.clientName)
	f.proc = testenv.StartProcess(b, "gateway", append(environ, extra...), f.addr)
	transport := &http.Transport{MaxIdleConnsPerHost: -1, DisableCompression: true}
	httpc := &http.Client{Transport: transport}
	ctx, cancel := context.WithCancel(context.Background())
	f.stop = func() {
		cancel()
		f.readers.Wait()
		transport.CloseIdleConnections()
		_ = f.proc.Signal(syscall.SIGTERM)
		wctx, wcancel := context.WithTimeout(context.Background(), time.Minute)
		defer wcancel()
		_ = f.proc.Wait(wctx)
	}
	open := func(session string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+f.addr+"/v1/sessions/"+session+"/events", nil)
		resp, err := httpc.Do(req) //nolint:bodyclose // the reader goroutine below closes it
		if err != nil {
			return
		}
		f.readers.Add(1)
		go func() {
			defer f.readers.Done()
			defer resp.Body.Close()
			br := bufio.NewReaderSize(resp.Body, 1024)
			for {
				line, err := br.ReadSlice('\n')
				if err != nil {
					return
				}
				if rest, ok := strings.CutPrefix(string(line), `data: {"t":`); ok {
					now := time.Now().UnixNano()
					sent, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
					f.mu.Lock()
					f.lat = append(f.lat, time.Duration(now-sent))
					f.mu.Unlock()
					f.received.Add(1)
				}
			}
		}()
	}
	start := time.Now()
	var opening sync.WaitGroup
	sem := make(chan struct{}, 64)
	for i := range clients {
		opening.Add(1)
		sem <- struct{}{}
		go func() { defer opening.Done(); defer func() { <-sem }(); open(ids[i%len(ids)]) }()
	}
	opening.Wait()
	testenv.WaitFor(b, max(2*time.Minute, time.Duration(clients)*24*time.Millisecond), "every stream open", func() bool {
		return scrape(b, f.addr, "turnstile_gateway_connections") == float64(clients)
	})
	f.openTime = time.Since(start)
	return f
}

// BenchmarkGatewayFanout runs one gateway process (TURNSTILE_ROLES=gateway) with as many concurrent
// SSE clients as a replica admits by default (defaultFanoutClients), ten to a session, and reports: the Redis connections the gateway holds, its heap
// per idle connection, and publish-to-receive latency p50/p99 next to raw XADD→XREAD latency
// measured at the same time, at the same pace, on the same Redis. Sizes: TURNSTILE_BENCH_CLIENTS,
// TURNSTILE_BENCH_SESSIONS, TURNSTILE_BENCH_EVENTS.
//
// Two gateway processes run one after the other: the first with GOGC=2, so that uncollected
// garbage stays within about 2% of the live heap and the heap figure is the connections' own
// cost; the second with the default GOGC for the latency figures.
func BenchmarkGatewayFanout(b *testing.B) {
	clients := benchInt("TURNSTILE_BENCH_CLIENTS", defaultFanoutClients(b))
	sessions := benchInt("TURNSTILE_BENCH_SESSIONS", max(clients/10, 1))
	events := benchInt("TURNSTILE_BENCH_EVENTS", 2000)
	env := testenv.New(b, testenv.Options{})
	ctx := context.Background()
	ids := make([]string, sessions)
	for i := range ids {
		ids[i] = fmt.Sprintf("bench-%d", i)
	}

	// Phase 1: memory and Redis connections with every client idle.
	mem := startFanout(b, env, ids[:1], 1, "GOGC=2")
	heapBase := scrape(b, mem.addr, "go_memstats_heap_alloc_bytes")
	mem.stop()
	mem = startFanout(b, env, ids, clients, "GOGC=2")
	heapIdle := scrape(b, mem.addr, "go_memstats_heap_alloc_bytes")
	stacks := scrape(b, mem.addr, "go_memstats_stack_inuse_bytes")
	redisConns := redisClients(b, env.Redis, mem.clientName)
	poolConns := scrape(b, mem.addr, "turnstile_gateway_redis_pool_connections")
	openTime := mem.openTime
	mem.stop()
	perConn := (heapIdle - heapBase) / float64(clients-1)

	// Phase 2: latency, against raw Redis in the same run.
	lat := startFanout(b, env, ids, clients)
	defer lat.stop()
	rawKey := env.Config.KeyPrefix + ":bench:raw"
	rawOpts, err := redis.ParseURL(env.Config.RedisURL)
	require.NoError(b, err)
	rawOpts.ClientName = "bench-raw-" + env.ID
	rawReader := redis.NewClient(rawOpts)
	defer rawReader.Close()
	var raw []time.Duration
	rawDone := make(chan struct{})
	go func() {
		defer close(rawDone)
		last := "$"
		for len(raw) < events*b.N {
			res, err := rawReader.XRead(ctx, &redis.XReadArgs{Streams: []string{rawKey, last}, Block: 10 * time.Second, Count: 100}).Result()
			now := time.Now().UnixNano()
			if err != nil {
				return
			}
			for _, m := range res[0].Messages {
				sent, _ := strconv.ParseInt(m.Values["t"].(string), 10, 64)
				raw = append(raw, time.Duration(now-sent))
				last = m.ID
			}
		}
	}()
	testenv.WaitFor(b, time.Minute, "raw reader blocked in XREAD", func() bool {
		list, _ := env.Redis.ClientList(ctx).Result()
		for _, line := range strings.Split(list, "\n") {
			if strings.Contains(line, "name="+rawOpts.ClientName+" ") && strings.Contains(line, "cmd=xread") {
				return true
			}
		}
		return false
	})

	pub := streams.NewPublisher(env.Redis, env.Config.KeyPrefix, 10000, time.Hour)
	turn := "00000000-0000-7000-8000-000000000001"
	b.ResetTimer()
	for range b.N {
		lat.received.Store(0)
		tick := time.NewTicker(2 * time.Millisecond) // 500 publishes/s, each to clients/sessions streams
		for i := range events {
			<-tick.C
			session := ids[rand.IntN(sessions)]
			data := fmt.Sprintf(`{"t":%d,"turn_id":%q,"attempt":1,"index":%d}`, time.Now().UnixNano(), turn, i)
			_, err := pub.Publish(ctx, storeKey(session), turn, 1, wire.Event{Type: "turn.delta", Data: []byte(data)}, "")
			require.NoError(b, err)
			require.NoError(b, env.Redis.XAdd(ctx, &redis.XAddArgs{Stream: rawKey, Values: []string{"t", strconv.FormatInt(time.Now().UnixNano(), 10)}}).Err())
		}
		tick.Stop()
		want := int64(events * clients / sessions)
		testenv.WaitFor(b, time.Minute, "every delivery", func() bool { return lat.received.Load() >= want })
	}
	b.StopTimer()
	<-rawDone

	lat.mu.Lock()
	got := slices.Clone(lat.lat)
	lat.mu.Unlock()
	slices.Sort(got)
	slices.Sort(raw)
	b.ReportMetric(float64(redisConns), "redis-conns")
	b.ReportMetric(perConn, "heap-B/conn")
	b.ReportMetric(stacks/float64(clients), "stack-B/conn")
	b.ReportMetric(float64(pct(got, .50).Microseconds()), "p50-µs")
	b.ReportMetric(float64(pct(got, .99).Microseconds()), "p99-µs")
	b.ReportMetric(float64(pct(raw, .50).Microseconds()), "raw-p50-µs")
	b.ReportMetric(float64(pct(raw, .99).Microseconds()), "raw-p99-µs")
	report := fmt.Sprintf(`gateway fan-out: %d clients over %d sessions, one gateway process
opened in:                   %v
redis connections (gateway): %d in CLIENT LIST by client name (command pool %v + 1 Pub/Sub)
heap per idle connection:    %.0f B (go_memstats_heap_alloc_bytes, %d clients minus 1 client, GOGC=2)
goroutine stacks:            %.0f B per connection (not heap)
in all:                      %.0f B per idle connection (target: at most 8 KiB)
publish->receive:            p50 %v  p99 %v  (%d deliveries of %d publishes at 500/s)
raw XADD->XREAD:             p50 %v  p99 %v  (%d samples, same run, same pace; target: p99 within 5ms of it)
`, clients, sessions, openTime.Round(time.Millisecond), redisConns, poolConns, perConn, clients, stacks/float64(clients), perConn+stacks/float64(clients),
		pct(got, .5), pct(got, .99), len(got), events*b.N, pct(raw, .5), pct(raw, .99), len(raw))
	b.Log("\n" + report)
	dir := os.Getenv("TURNSTILE_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", ".artifacts")
	}
	_ = os.MkdirAll(filepath.Join(dir, "bench"), 0o755)
	_ = os.WriteFile(filepath.Join(dir, "bench", "gateway-fanout.txt"), []byte(report), 0o644)
}

// fanoutSpareFiles is what defaultFanoutClients leaves of the open-file limit for everything but
// the streams: listeners, Redis connections, the binary's own files.
const fanoutSpareFiles = 1000

// defaultFanoutClients is the gateway's default cap of streams (TURNSTILE_GATEWAY_MAX_CONNECTIONS),
// or less when the open-file limit would not hold it: this process holds one end of every stream and
// the gateway process, which inherits the limit, the other. It raises the soft limit to the hard
// one first, and says when it had to stay below the cap.
func defaultFanoutClients(b *testing.B) int {
	n := config.GatewayMaxConnectionsDefault
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) != nil {
		return n
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	if room := int(lim.Cur) - fanoutSpareFiles; room < n {
		b.Logf("open-file limit %d: %d streams instead of the gateway's default cap of %d (raise the hard limit to measure the cap)", lim.Cur, room, n)
		return max(room, 1)
	}
	return n
}
