package consume

import (
	"context"
	"log/slog"
	"strconv"
	"testing"

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
