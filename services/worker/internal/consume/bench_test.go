package consume

import (
	"context"
	"log/slog"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkSchedule is the consumer's own bookkeeping for one record, without Kafka or a handler:
// the record queued behind its session as a fetch hands it over (addLocked), started when a slot is
// free (takeLocked) and finished (finishLocked), with the pause decision after each (pauseLocked),
// over 8 partitions of one-turn sessions with 1,000 turns in flight, as in the peer scenario. Its
// baseline is the cost of the map it keeps the sessions in: one insert and one delete of a session
// key per record (BenchmarkScheduleBaseline).
func BenchmarkSchedule(b *testing.B) {
	const parts, inflight = 8, 1000
	c, err := New(Config{Brokers: []string{"127.0.0.1:1"}, Topic: "bench", Group: "bench", MaxInflight: inflight},
		func(context.Context, *kgo.Record) Result { return Commit }, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	// The scheduler's state as Start leaves it, with a client that joins no group.
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.cfg.Brokers...))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	c.client, c.parts, c.sessions, c.tenants = cl, map[partKey]*partState{}, map[sessionKey]*session{}, map[string]*tenant{}
	all := make([]int32, parts)
	for p := range all {
		all[p] = int32(p)
	}
	c.assigned(context.Background(), c.client, map[string][]int32{"bench": all})
	recs := benchRecords(parts, 1<<16)
	type running struct {
		s *session
		q queued
	}
	var run []running
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		c.mu.Lock()
		c.addLocked(recs[i%len(recs)])
		if s, q, ok := c.takeLocked(); ok {
			run = append(run, running{s, q})
		}
		if len(run) >= inflight {
			c.finishLocked(run[0].s, run[0].q, Commit)
			run = run[1:]
		}
		// As scheduleLocked does after every start and finish.
		c.pauseLocked()
		c.mu.Unlock()
		i++
		if i%len(recs) == 0 {
			b.StopTimer()
			// The next lap's offsets continue the partitions' own.
			for _, r := range recs {
				r.Offset += int64(len(recs) / parts)
			}
			b.StartTimer()
		}
	}
}

// BenchmarkScheduleBaseline is one insert and one delete of a session key per record in a map of
// about a thousand sessions: the least a consumer that keeps its sessions in a map can do.
func BenchmarkScheduleBaseline(b *testing.B) {
	recs := benchRecords(8, 1<<16)
	m := map[sessionKey]*session{}
	var keys []sessionKey
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		rec := recs[i%len(recs)]
		sk := sessionKey{partKey{rec.Topic, rec.Partition}, string(rec.Key)}
		m[sk] = &session{sk: sk}
		keys = append(keys, sk)
		if len(keys) >= 1000 {
			delete(m, keys[0])
			keys = keys[1:]
		}
		i++
	}
}

// benchRecords is n records of fresh sessions, spread round-robin over parts partitions, each
// partition's offsets from 0.
func benchRecords(parts, n int) []*kgo.Record {
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "bench", Partition: int32(i % parts), Offset: int64(i / parts), Key: []byte("session-" + strconv.Itoa(i))}
	}
	return recs
}

// BenchmarkReadAheadMemory is the memory one fetched, unstarted turn costs in the read-ahead, and
// the largest read-ahead a worker holds with 1,000,000 turns queued. A queue of 1,000,000 turns
// (an envelope of a typical turn, about 420 bytes of value, and its key; 10 tenants, 1,000
// sessions, 8 partitions) is handed to the consumer as the client would hand it over: a fetch of
// each partition that is not paused, a quarter of FetchMaxBytes of records at a time, then the
// pause decision (pauseLocked) — until every partition is paused or the queue is fetched. No turn
// starts (every slot is taken), so what the consumer holds then is the largest read-ahead. It
// reports the heap per buffered turn beside the record's own size, and the read-ahead's length and
// heap (TURNSTILE_WORKER_READ_AHEAD, 32768 by default, bounds it, plus at most one fetch a
// partition).
func BenchmarkReadAheadMemory(b *testing.B) {
	const readAhead, queued, parts = 32768, 1_000_000, 8
	value := []byte(`{"v":1,"turn_id":"0193a0c2-7d1e-7b3c-9f11-2a6b5c4d3e2f","session_id":"session-0042","tenant":"tenant-3",` +
		`"input":{"text":"Summarise the last three messages and suggest a reply that keeps the tone friendly."},` +
		`"metadata":{"source":"web","locale":"en-GB"},"deadline":"2026-12-04T21:10:00Z","accepted_at":"2026-12-04T21:00:00Z",` +
		`"agent":"agent","region":"eu1"}`)
	keyOf := func(i int) string { return "tenant-" + strconv.Itoa(i%10) + "/session-" + strconv.Itoa(i%1000) }
	// The record's own size: its value and its key (the longest of the keys).
	recordBytes := float64(len(value) + len(keyOf(queued-1)))
	var perTurn float64
	var held, fetched int
	for b.Loop() {
		c, err := New(Config{
			Brokers: []string{"127.0.0.1:1"}, Topic: "bench", Group: "bench", MaxInflight: 1,
			MaxBuffered: readAhead, MaxHeld: readAhead,
		}, func(context.Context, *kgo.Record) Result { return Commit }, slog.New(slog.DiscardHandler))
		if err != nil {
			b.Fatal(err)
		}
		c.parts, c.sessions, c.tenants = map[partKey]*partState{}, map[sessionKey]*session{}, map[string]*tenant{}
		all := make([]int32, parts)
		for p := range all {
			all[p] = int32(p)
		}
		c.assigned(context.Background(), fakeClient(b, c), map[string][]int32{"bench": all})
		// One fetch of a partition: a quarter of FetchMaxBytes (consume.go) of these records.
		perFetch := max(int(c.cfg.FetchMaxBytes/4)/(len(value)+len(keyOf(0))), 1)
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		next := make([]int, parts) // the next offset of each partition; queued/parts turns each
		fetched = 0
		for progress := true; progress; {
			progress = false
			for p := range int32(parts) {
				ps := c.parts[partKey{"bench", p}]
				if ps.paused || next[p] >= queued/parts {
					continue
				}
				for range min(perFetch, queued/parts-next[p]) {
					i := next[p]*parts + int(p)
					v := make([]byte, len(value))
					copy(v, value)
					c.addLocked(&kgo.Record{Topic: "bench", Partition: p, Offset: int64(next[p]), Key: []byte(keyOf(i)), Value: v, Timestamp: time.Now()})
					next[p]++
					fetched++
				}
				c.pauseLocked()
				progress = true
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		held = 0
		for _, ps := range c.parts {
			held += ps.held
		}
		perTurn = float64(after.HeapAlloc-before.HeapAlloc) / float64(held)
		runtime.KeepAlive(c)
	}
	if fetched != held || held >= queued {
		b.Fatalf("fetched %d, held %d of %d queued: the read-ahead is not bounded", fetched, held, queued)
	}
	b.ReportMetric(perTurn, "B/turn")
	b.ReportMetric(recordBytes, "record-B")
	b.ReportMetric(perTurn/recordBytes, "B/turn-per-record-B")
	b.ReportMetric(float64(held), "read-ahead-turns@1M-queued")
	b.ReportMetric(perTurn*float64(held)/(1<<20), "read-ahead-MiB@1M-queued")
}

// fakeClient is a client that joins no group, for the scheduler's state as Start leaves it.
func fakeClient(b *testing.B, c *Consumer) *kgo.Client {
	b.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.cfg.Brokers...))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	c.client = cl
	return cl
}
