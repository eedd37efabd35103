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

// BenchmarkReadAheadMemory is the memory one fetched, unstarted turn costs in the read-ahead: a
// record as the client hands it over (an envelope of a typical turn, about 420 bytes of value,
// and its key) queued behind its session by the fair scheduler, over 1,000 sessions of 10
// tenants. It reports the heap per buffered turn beside the record's own size, and the heap of
// the largest read-ahead the worker holds however deep the queue (1,000,000 queued turns fill
// TURNSTILE_WORKER_READ_AHEAD, 32768 by default, and no more).
func BenchmarkReadAheadMemory(b *testing.B) {
	const readAhead, queued = 32768, 1_000_000
	value := []byte(`{"v":1,"turn_id":"0193a0c2-7d1e-7b3c-9f11-2a6b5c4d3e2f","session_id":"session-0042","tenant":"tenant-3",` +
		`"input":{"text":"Summarise the last three messages and suggest a reply that keeps the tone friendly."},` +
		`"metadata":{"source":"web","locale":"en-GB"},"deadline":"2026-12-04T21:10:00Z","accepted_at":"2026-12-04T21:00:00Z",` +
		`"agent":"agent","region":"eu1"}`)
	held := min(readAhead, queued)
	var perTurn float64
	for b.Loop() {
		c, err := New(Config{
			Brokers: []string{"127.0.0.1:1"}, Topic: "bench", Group: "bench", MaxInflight: 1,
			MaxBuffered: readAhead, MaxHeld: readAhead,
		}, func(context.Context, *kgo.Record) Result { return Commit }, slog.New(slog.DiscardHandler))
		if err != nil {
			b.Fatal(err)
		}
		c.parts, c.sessions, c.tenants = map[partKey]*partState{}, map[sessionKey]*session{}, map[string]*tenant{}
		c.assigned(context.Background(), fakeClient(b, c), map[string][]int32{"bench": {0}})
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for i := range held {
			v := make([]byte, len(value))
			copy(v, value)
			key := "tenant-" + strconv.Itoa(i%10) + "/session-" + strconv.Itoa(i%1000)
			c.addLocked(&kgo.Record{Topic: "bench", Partition: 0, Offset: int64(i), Key: []byte(key), Value: v, Timestamp: time.Now()})
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		perTurn = float64(after.HeapAlloc-before.HeapAlloc) / float64(held)
		runtime.KeepAlive(c)
	}
	b.ReportMetric(perTurn, "B/turn")
	b.ReportMetric(float64(len(value)+len("tenant-0/session-000")), "record-B")
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
