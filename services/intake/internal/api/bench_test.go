package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/turnstile-run/turnstile/pkg/kafka"
	"github.com/turnstile-run/turnstile/pkg/streamtoken"
	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/services/intake/internal/record"
)

// benchResult is one handler's figures in one run.
type benchResult struct {
	rate     float64 // requests per second
	p50, p99 time.Duration
}

// BenchmarkPostTurn measures POST /v1/sessions/{id}/turns under closed-loop load (16 concurrent
// clients over keep-alive connections) for several handlers on the same in-process Kafka broker, in
// the same run: Bare answers 202 and produces nothing; Minimal decodes the body and produces it
// synchronously (the floor of the job); MinimalKeyed adds the one Redis round trip of an
// Idempotency-Key (the floor of a keyed request); Intake is the real handler with strict validation, an
// Idempotency-Key per request (a Redis SET NX), the tenant's GCRA limit in Redis, backlog
// admission, the session-owner check and the queued-row recorder writing to Postgres. IntakeHalfRate
// then paces Intake open-loop at half the rate it reached, for its p99 there. Ratios are logged at
// the end; docs/BENCHMARKS.md records a run.
func BenchmarkPostTurn(b *testing.B) {
	env := testenv.New(b, testenv.Options{Partitions: 4})
	producer, err := kafka.NewClient(kafka.ProducerOpts(env.Config.BrokerList())...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(producer.Close)

	bare := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(`{"status":"queued"}` + "\n"))
	})
	minimal := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req postTurnRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		v, _ := json.Marshal(req)
		rec := &kgo.Record{Topic: env.Config.Topic, Key: []byte(r.PathValue("session_id")), Value: v}
		if err := producer.ProduceSync(r.Context(), rec).FirstErr(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(`{"status":"queued"}` + "\n"))
	})
	// MinimalKeyed is the floor of a keyed request: Minimal plus the one Redis round trip an
	// Idempotency-Key needs (SET NX GET of the key, as intake's record does), before the produce.
	minimalKeyed := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req postTurnRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		key := env.Config.KeyPrefix + ":bench-idem:" + r.Header.Get("Idempotency-Key")
		if err := env.Redis.SetArgs(r.Context(), key, "h", redis.SetArgs{Mode: "NX", Get: true, TTL: time.Hour}).Err(); err != nil && !errors.Is(err, redis.Nil) {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		v, _ := json.Marshal(req)
		rec := &kgo.Record{Topic: env.Config.Topic, Key: []byte(r.PathValue("session_id")), Value: v}
		if err := producer.ProduceSync(r.Context(), rec).FirstErr(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(`{"status":"queued"}` + "\n"))
	})
	reg := prometheus.NewRegistry()
	cfg := testConfig(env)
	cfg.TenantRate, cfg.TenantBurst, cfg.MaxQueuedTurns = 1_000_000, 1_000_000, 100_000_000
	cfg.BacklogAge = func() time.Duration { return time.Second }
	rec := record.New(env.Pool, 0, env.Log, reg) // zero: TURNSTILE_QUEUE_FLUSH_INTERVAL's default
	_ = rec.Start(context.Background())
	b.Cleanup(func() { _ = rec.Stop(context.Background()) })
	h := New(cfg, Deps{
		Producer: producer, Pool: env.Pool, Redis: env.Redis, Signer: streamtoken.New(streamtoken.Options{TTL: time.Hour}),
		Recorder: rec, Log: env.Log, Registry: reg,
	})
	b.Cleanup(func() { _ = h.Close() })
	router := chi.NewRouter()
	h.Routes(router)
	muxFor := func(hh http.Handler) http.Handler {
		m := http.NewServeMux()
		m.Handle("POST /v1/sessions/{session_id}/turns", hh)
		return m
	}

	results := map[string]benchResult{}
	// One sequence for every round of every handler: b.Run calls each handler's function several
	// times with growing b.N, and a key seen in an earlier round would make a request a retry.
	var seq atomic.Int64
	run := func(name string, handler http.Handler, paced func() float64, noKey ...bool) {
		b.Run(name, func(b *testing.B) {
			srv := httptest.NewServer(handler)
			defer srv.Close()
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 512}}
			defer client.CloseIdleConnections()
			var mu sync.Mutex
			lat := make([]time.Duration, 0, b.N)
			one := func() time.Duration {
				n := seq.Add(1)
				body := fmt.Sprintf(`{"input":{"text":"benchmark turn %d"}}`, n)
				req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/v1/sessions/bench-%d/turns", srv.URL, n%64), bytes.NewBufferString(body))
				req.Header.Set("Content-Type", "application/json")
				if len(noKey) == 0 {
					req.Header.Set("Idempotency-Key", fmt.Sprintf("k-%d", n))
				}
				start := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					b.Error(err)
					return 0
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				d := time.Since(start)
				if resp.StatusCode != http.StatusAccepted {
					b.Errorf("status %d", resp.StatusCode)
				}
				return d
			}
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			cpu0 := cpuNow()
			if paced == nil {
				b.SetParallelism(8)
				b.RunParallel(func(pb *testing.PB) {
					local := make([]time.Duration, 0, 1024)
					for pb.Next() {
						local = append(local, one())
					}
					mu.Lock()
					lat = append(lat, local...)
					mu.Unlock()
				})
			} else {
				// Open loop: requests start on a fixed schedule whatever the answers' latency.
				interval := time.Duration(float64(time.Second) / paced())
				var wg sync.WaitGroup
				next := time.Now()
				for range b.N {
					time.Sleep(time.Until(next)) //nolint:forbidigo // paces open-loop arrivals on a schedule; it waits for no state
					next = next.Add(interval)
					wg.Go(func() {
						d := one()
						mu.Lock()
						lat = append(lat, d)
						mu.Unlock()
					})
				}
				wg.Wait()
			}
			elapsed := time.Since(start)
			b.StopTimer()
			cpu1 := cpuNow()
			slices.Sort(lat)
			r := benchResult{rate: float64(len(lat)) / elapsed.Seconds(), p50: pct(lat, 0.50), p99: pct(lat, 0.99)}
			results[name] = r
			b.ReportMetric(r.rate, "turns/s")
			b.ReportMetric(float64(r.p50.Microseconds()), "p50-µs")
			b.ReportMetric(float64(r.p99.Microseconds()), "p99-µs")
			// CPU per request, less sensitive than the rate to other load on a shared machine: this
			// process (clients, server, broker), and the local Postgres and Redis servers (which
			// includes whatever else they serve meanwhile, so it is an upper bound).
			if n := float64(len(lat)); n > 0 {
				b.ReportMetric(float64((cpu1.self-cpu0.self).Microseconds())/n, "cpu-µs/op")
				b.ReportMetric(float64((cpu1.stores-cpu0.stores).Microseconds())/n, "store-cpu-µs/op")
			}
		})
	}
	run("Bare", muxFor(bare), nil)
	run("Minimal", muxFor(minimal), nil)
	run("MinimalKeyed", muxFor(minimalKeyed), nil)
	run("Intake", router, nil)
	run("IntakeNoKey", router, nil, true)
	run("IntakeHalfRate", router, func() float64 { return results["Intake"].rate / 2 })
	bareR, minR, keyedR, inR, half := results["Bare"], results["Minimal"], results["MinimalKeyed"], results["Intake"], results["IntakeHalfRate"]
	if bareR.rate > 0 && minR.rate > 0 && keyedR.rate > 0 {
		b.Logf("ratios: minimal/bare %.2f, intake/minimal %.2f, intake/minimal-keyed %.2f (the keyed floor), nokey/minimal %.2f, intake/bare %.2f; intake p99 at half its max rate (%.0f/s): %s",
			minR.rate/bareR.rate, inR.rate/minR.rate, inR.rate/keyedR.rate, results["IntakeNoKey"].rate/minR.rate, inR.rate/bareR.rate, half.rate, half.p99)
	}
}

func pct(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(float64(len(sorted))*q))]
}

// cpuTimes is CPU time used so far by this process and by the local Postgres and Redis servers.
type cpuTimes struct{ self, stores time.Duration }

// cpuNow reads this process's CPU time (getrusage) and the stores' (every process named postgres
// or redis-server in /proc; zero where /proc is not there or they run elsewhere).
func cpuNow() cpuTimes {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	c := cpuTimes{self: time.Duration(ru.Utime.Nano() + ru.Stime.Nano())}
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		if d.Name()[0] < '0' || d.Name()[0] > '9' {
			continue
		}
		stat, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ... utime(14) stime(15), in clock ticks (100 Hz on Linux).
		open, closeIdx := bytes.IndexByte(stat, '('), bytes.LastIndexByte(stat, ')')
		if open < 0 || closeIdx < open {
			continue
		}
		if comm := string(stat[open+1 : closeIdx]); comm != "postgres" && comm != "redis-server" {
			continue
		}
		f := strings.Fields(string(stat[closeIdx+2:]))
		if len(f) < 13 {
			continue
		}
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		c.stores += time.Duration(ut+st) * 10 * time.Millisecond
	}
	return c
}
