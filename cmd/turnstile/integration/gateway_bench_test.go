package integration

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
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
	ctx        context.Context
	cancel     context.CancelFunc
	readers    sync.WaitGroup
	transports []*http.Transport
	h2c        bool
	perConn    int
	opened     int
	mu         sync.Mutex
	lat        []time.Duration
	received   atomic.Int64
}

// startFanout starts a gateway process (extra environment appended) whose streams are opened over
// HTTP/1.1, one connection each, or over h2c, perConn streams to a connection.
func startFanout(b *testing.B, env *testenv.Env, h2c bool, perConn int, extra ...string) *fanout {
	b.Helper()
	f := &fanout{addr: testenv.FreeAddr(b), clientName: "bench-gw-" + testenv.RandomHex(4), h2c: h2c, perConn: perConn}
	sep := "?"
	if strings.Contains(env.Config.RedisURL, "?") {
		sep = "&"
	}
	environ := append(env.Environ("gateway", f.addr, env.ID+"-gw"),
		"TURNSTILE_KEEPALIVE=15s", "TURNSTILE_GATEWAY_MAX_CONNECTIONS=100000",
		"TURNSTILE_REDIS_URL="+env.Config.RedisURL+sep+"client_name="+f.clientName)
	f.proc = testenv.StartProcess(b, "gateway", append(environ, extra...), f.addr)
	f.ctx, f.cancel = context.WithCancel(context.Background())
	return f
}

// stop closes the clients and ends the gateway process.
func (f *fanout) stop() {
	f.cancel()
	f.readers.Wait()
	for _, t := range f.transports {
		t.CloseIdleConnections()
	}
	_ = f.proc.Signal(syscall.SIGTERM)
	wctx, wcancel := context.WithTimeout(context.Background(), time.Minute)
	defer wcancel()
	_ = f.proc.Wait(wctx)
}

// transport returns the transport of the next stream: one for all HTTP/1.1 streams (each its own
// connection), one per perConn streams over h2c (each transport one connection).
func (f *fanout) transport(i int) *http.Transport {
	if !f.h2c {
		i = 0
	} else {
		i /= f.perConn
	}
	for len(f.transports) <= i {
		t := &http.Transport{MaxIdleConnsPerHost: -1, DisableCompression: true}
		if f.h2c {
			var p http.Protocols
			p.SetUnencryptedHTTP2(true)
			t.Protocols = &p
		}
		f.transports = append(f.transports, t)
	}
	return f.transports[i]
}

// open opens n more streams spread evenly over the sessions, each timing the events it receives,
// and waits until the gateway counts them all.
func (f *fanout) open(b *testing.B, ids []string, n int) time.Duration {
	b.Helper()
	start := time.Now()
	var opening sync.WaitGroup
	sem := make(chan struct{}, 64)
	var failed atomic.Int64
	for i := f.opened; i < f.opened+n; i++ {
		httpc := &http.Client{Transport: f.transport(i)}
		opening.Add(1)
		sem <- struct{}{}
		go func() {
			defer opening.Done()
			defer func() { <-sem }()
			if !f.stream(httpc, ids[i%len(ids)]) {
				failed.Add(1)
			}
		}()
	}
	opening.Wait()
	require.Zero(b, failed.Load(), "streams that failed to open")
	f.opened += n
	waitMetric(b, f.addr, max(time.Duration(benchInt("TURNSTILE_BENCH_OPEN_TIMEOUT_S", 120))*time.Second, time.Duration(f.opened)*24*time.Millisecond), "turnstile_gateway_connections", float64(f.opened))
	return time.Since(start)
}

func (f *fanout) stream(httpc *http.Client, session string) bool {
	req, _ := http.NewRequestWithContext(f.ctx, http.MethodGet, "http://"+f.addr+"/v1/sessions/"+session+"/events", nil)
	resp, err := httpc.Do(req) //nolint:bodyclose // the reader goroutine below closes it
	if err != nil {
		return false
	}
	if want := map[bool]int{false: 1, true: 2}[f.h2c]; resp.StatusCode != http.StatusOK || resp.ProtoMajor != want {
		_ = resp.Body.Close()
		return false
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
	return true
}

// waitMetric polls a gateway metric (a quarter second apart: scraping is not free for a process
// holding thousands of streams) until it reaches want.
func waitMetric(b *testing.B, addr string, timeout time.Duration, name string, want float64) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	poll := time.NewTicker(250 * time.Millisecond)
	defer poll.Stop()
	for ; ; <-poll.C {
		got := scrape(b, addr, name)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("timed out after %v waiting for %s to reach %v (at %v; streams closed by the gateway: %v, resumes: %v)", timeout, name, want, got,
				scrape(b, addr, "turnstile_gateway_streams_closed_total"), scrape(b, addr, "turnstile_gateway_resumes_total"))
		}
	}
}

// memory is what a gateway process holds: heap in use, goroutine stacks, goroutines.
type memory struct{ heapInuse, heapAlloc, stacks, goroutines float64 }

// settledMemory scrapes the gateway's memory until two readings a second apart agree within 0.5%
// (GOGC=2 collects continuously; the streams' opening leaves garbage for a few cycles).
func settledMemory(b *testing.B, addr string) memory {
	b.Helper()
	read := func() memory {
		return memory{
			heapInuse: scrape(b, addr, "go_memstats_heap_inuse_bytes"), heapAlloc: scrape(b, addr, "go_memstats_heap_alloc_bytes"),
			stacks: scrape(b, addr, "go_memstats_stack_inuse_bytes"), goroutines: scrape(b, addr, "go_goroutines"),
		}
	}
	last := read()
	poll := time.NewTicker(time.Second)
	defer poll.Stop()
	for range 30 {
		<-poll.C
		m := read()
		if math.Abs(m.heapInuse-last.heapInuse) <= 0.005*last.heapInuse && m.goroutines == last.goroutines {
			return m
		}
		last = m
	}
	return last
}

// fanoutResult is one protocol's figures.
type fanoutResult struct {
	proto                        string
	clients, sessions, conns     int
	openTime                     time.Duration
	redisConns                   int
	poolConns                    float64
	heap, heapAlloc, stacks, gor float64 // per idle stream
	lat, raw                     []time.Duration
	publishes                    int
}

// BenchmarkGatewayFanout runs one gateway process (TURNSTILE_ROLES=gateway) with as many
// concurrent SSE clients as a replica admits by default, ten to a session, twice: over HTTP/1.1
// (one connection a stream, as many as the open-file limit allows: both processes hold one end of
// every stream) and over h2c (HTTP/2 cleartext, 100 streams to a connection, as from an L7 proxy).
// For each it reports the Redis connections the gateway holds, heap, goroutine stacks and
// goroutines per idle stream, and publish-to-receive latency p50/p99 next to raw XADD→XREAD
// latency measured at the same time, at the same pace, on the same Redis. Sizes:
// TURNSTILE_BENCH_CLIENTS, TURNSTILE_BENCH_SESSIONS, TURNSTILE_BENCH_EVENTS; which protocols:
// TURNSTILE_BENCH_PROTOCOLS (default "http1,h2c"); streams per h2c connection:
// TURNSTILE_BENCH_STREAMS_PER_CONN.
//
// Each protocol runs two gateway processes one after the other: the first with GOGC=2, so that
// uncollected garbage stays within about 2% of the live heap, for the memory figures — the
// process's heap in use, stacks and goroutines with one stream open and then with all, each once
// the readings settle, the difference divided by the streams added; the second with the default
// GOGC for the latency figures.
func BenchmarkGatewayFanout(b *testing.B) {
	protocols := strings.Split(cmp.Or(os.Getenv("TURNSTILE_BENCH_PROTOCOLS"), "http1,h2c"), ",")
	var results []fanoutResult
	for _, proto := range protocols {
		b.Run(proto, func(b *testing.B) {
			r := runFanout(b, proto)
			results = append(results, r)
		})
	}
	var report strings.Builder
	for _, r := range results {
		fmt.Fprintf(&report, `gateway fan-out, %s: %d streams over %d sessions on %d client connections, one gateway process
opened in:                   %v
redis connections (gateway): %d in CLIENT LIST by client name (command pool %v + 1 Pub/Sub)
heap in use per idle stream: %.0f B (go_memstats_heap_inuse_bytes, all streams minus 1 stream, GOGC=2; heap_alloc %.0f B)
goroutine stacks:            %.0f B per stream (go_memstats_stack_inuse_bytes, the same difference)
in all:                      %.0f B per idle stream (target: at most 8 KiB)
goroutines:                  %.3f per idle stream
publish->receive:            p50 %v  p99 %v  (%d deliveries of %d publishes at 500/s)
raw XADD->XREAD:             p50 %v  p99 %v  (%d samples, same run, same pace; target: p99 within 5ms of it)

`, r.proto, r.clients, r.sessions, r.conns, r.openTime.Round(time.Millisecond), r.redisConns, r.poolConns,
			r.heap, r.heapAlloc, r.stacks, r.heap+r.stacks, r.gor,
			pct(r.lat, .5), pct(r.lat, .99), len(r.lat), r.publishes, pct(r.raw, .5), pct(r.raw, .99), len(r.raw))
	}
	b.Log("\n" + report.String())
	dir := os.Getenv("TURNSTILE_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", ".artifacts")
	}
	_ = os.MkdirAll(filepath.Join(dir, "bench"), 0o755)
	_ = os.WriteFile(filepath.Join(dir, "bench", "gateway-fanout.txt"), []byte(report.String()), 0o644)
}

func runFanout(b *testing.B, proto string) fanoutResult {
	h2c := proto == "h2c"
	if !h2c && proto != "http1" {
		b.Fatalf("TURNSTILE_BENCH_PROTOCOLS: unknown protocol %q (http1, h2c)", proto)
	}
	perConn, most := 1, config.GatewayMaxConnectionsDefault
	if h2c {
		perConn = benchInt("TURNSTILE_BENCH_STREAMS_PER_CONN", 100)
	} else {
		most = defaultFanoutClients(b)
	}
	clients := max(min(benchInt("TURNSTILE_BENCH_CLIENTS", most), most), 2)
	sessions := benchInt("TURNSTILE_BENCH_SESSIONS", max(clients/10, 1))
	events := benchInt("TURNSTILE_BENCH_EVENTS", 2000)
	env := testenv.New(b, testenv.Options{})
	ctx := context.Background()
	ids := make([]string, sessions)
	for i := range ids {
		ids[i] = fmt.Sprintf("bench-%d", i)
	}
	r := fanoutResult{proto: proto, clients: clients, sessions: sessions, conns: (clients + perConn - 1) / perConn}

	// Phase 1: memory and Redis connections with every client idle.
	mem := startFanout(b, env, h2c, perConn, "GOGC=2")
	mem.open(b, ids, 1)
	before := settledMemory(b, mem.addr)
	r.openTime = mem.open(b, ids, clients-1)
	after := settledMemory(b, mem.addr)
	r.redisConns = redisClients(b, env.Redis, mem.clientName)
	r.poolConns = scrape(b, mem.addr, "turnstile_gateway_redis_pool_connections")
	mem.stop()
	added := float64(clients - 1)
	r.heap = (after.heapInuse - before.heapInuse) / added
	r.heapAlloc = (after.heapAlloc - before.heapAlloc) / added
	r.stacks = (after.stacks - before.stacks) / added
	r.gor = (after.goroutines - before.goroutines) / added

	// Phase 2: latency, against raw Redis in the same run.
	lat := startFanout(b, env, h2c, perConn)
	defer lat.stop()
	lat.open(b, ids, clients)
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
	r.lat = slices.Clone(lat.lat)
	lat.mu.Unlock()
	r.raw = raw
	r.publishes = events * b.N
	slices.Sort(r.lat)
	slices.Sort(r.raw)
	b.ReportMetric(float64(r.clients), "streams")
	b.ReportMetric(float64(r.redisConns), "redis-conns")
	b.ReportMetric(r.heap, "heap-B/stream")
	b.ReportMetric(r.stacks, "stack-B/stream")
	b.ReportMetric(r.gor, "goroutines/stream")
	b.ReportMetric(float64(pct(r.lat, .50).Microseconds()), "p50-µs")
	b.ReportMetric(float64(pct(r.lat, .99).Microseconds()), "p99-µs")
	b.ReportMetric(float64(pct(r.raw, .50).Microseconds()), "raw-p50-µs")
	b.ReportMetric(float64(pct(r.raw, .99).Microseconds()), "raw-p99-µs")
	return r
}

// fanoutSpareFiles is what defaultFanoutClients leaves of the open-file limit for everything but
// the streams: listeners, Redis and Postgres connections, the binaries' own files.
const fanoutSpareFiles = 100

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
