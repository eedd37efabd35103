package streams

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

func benchRedis(ctx context.Context, b testing.TB) (redis.UniversalClient, string) {
	b.Helper()
	u := os.Getenv("TURNSTILE_REDIS_URL")
	if u == "" {
		u = config.RedisURLDefault
	}
	opts, err := redis.ParseURL(u)
	if err != nil {
		b.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	if err := rdb.Ping(ctx).Err(); err != nil {
		b.Fatalf("redis (is it running?): %v", err)
	}
	prefix := "bench-" + testenv.RandomHex(4)
	b.Cleanup(func() {
		testenv.DeletePrefix(context.WithoutCancel(ctx), rdb, prefix)
		_ = rdb.Close()
	})
	return rdb, prefix
}

// BenchmarkPublish is the fenced publish script: fence check, XADD, trims, TTLs and the Pub/Sub
// notification, in one round trip. Its baseline is BenchmarkPublishBaselineXADD.
func BenchmarkPublish(b *testing.B) {
	ctx := context.Background()
	rdb, prefix := benchRedis(ctx, b)
	p := NewPublisher(rdb, prefix, 10000, time.Hour)
	ev := wire.NewEvent(wire.EventDelta, wire.DeltaData{EventBase: wire.EventBase{TurnID: "t", Attempt: 1}, Index: 0, Text: "word "})
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := p.Publish(ctx, sk("s"+strconv.Itoa(i%64)), "t", 1, ev, ""); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPublishBaselineXADD is the floor under BenchmarkPublish: a bare XADD of the same fields
// with approximate MAXLEN trimming, one round trip, no fence.
func BenchmarkPublishBaselineXADD(b *testing.B) {
	ctx := context.Background()
	rdb, prefix := benchRedis(ctx, b)
	ev := wire.NewEvent(wire.EventDelta, wire.DeltaData{EventBase: wire.EventBase{TurnID: "t", Attempt: 1}, Index: 0, Text: "word "})
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		k := KeysFor(prefix, sk("s"+strconv.Itoa(i%64)))
		if err := rdb.XAdd(ctx, &redis.XAddArgs{
			Stream: k.Events, MaxLen: 10000, Approx: true,
			Values: []any{"type", string(ev.Type), "turn", "t", "data", string(ev.Data), "tp", ""},
		}).Err(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPublishMany is BenchmarkPublish for the worker's batched path (PublishMany). Compare
// events/s with BenchmarkPublish's one event per round trip.
//
//   - Sessions64: 64 events of 64 long-lived sessions per op, one round trip.
//   - FreshTurns500: the worker's no-op turns. Each op is one batch of 500 events, and every 500
//     fresh sessions take three ops: all their turn.started, then all their turn.delta, then all
//     their turn.completed, as the worker's publish batcher sees them (a turn waits for each
//     publish before the next, so its events land in different batches).
//   - FreshTurnsWhole500: the same events in batches of 500 where each turn's three events are
//     adjacent (a session's events share a batch).
//
// When Redis runs on this machine, redis-cpu-µs/event is the CPU time the redis-server process
// spent (utime+stime from /proc/<pid>/stat, 10 ms ticks) divided by the events published; it
// includes whatever else that Redis served meanwhile. -benchtime=120x makes the Fresh benchmarks
// 20,000 sessions × 3 events, enough ticks for a stable figure.
func BenchmarkPublishMany(b *testing.B) {
	ctx := context.Background()
	ev := wire.NewEvent(wire.EventDelta, wire.DeltaData{EventBase: wire.EventBase{TurnID: "t", Attempt: 1}, Index: 0, Text: "word "})

	b.Run("Sessions64", func(b *testing.B) {
		rdb, prefix := benchRedis(ctx, b)
		p := NewPublisher(rdb, prefix, 10000, time.Hour)
		ms := make([]Message, 64)
		for i := range ms {
			ms[i] = Message{Session: sk("s" + strconv.Itoa(i)), TurnID: "t", Token: 1, Event: ev}
		}
		benchPublishMany(ctx, b, rdb, p, func(int) []Message { return ms })
	})

	const batch = 500
	b.Run("FreshTurns500", func(b *testing.B) {
		rdb, prefix := benchRedis(ctx, b)
		p := NewPublisher(rdb, prefix, 10000, time.Hour)
		ms := make([]Message, batch)
		benchPublishMany(ctx, b, rdb, p, func(op int) []Message {
			block, kind := op/3, op%3
			for i := range ms {
				ms[i] = noopTurnEvent(block*batch+i, kind)
			}
			return ms
		})
	})

	b.Run("FreshTurnsWhole500", func(b *testing.B) {
		rdb, prefix := benchRedis(ctx, b)
		p := NewPublisher(rdb, prefix, 10000, time.Hour)
		ms := make([]Message, batch)
		benchPublishMany(ctx, b, rdb, p, func(op int) []Message {
			for i := range ms {
				n := op*batch + i
				ms[i] = noopTurnEvent(n/3, n%3)
			}
			return ms
		})
	})
}

// noopTurnEvent is event kind (0 turn.started, 1 turn.delta, 2 turn.completed) of the no-op turn
// of fresh session n.
func noopTurnEvent(n, kind int) Message {
	sid := "f" + strconv.Itoa(n)
	base := wire.EventBase{TurnID: "t-" + sid, Attempt: 1}
	var e wire.Event
	switch kind {
	case 0:
		e = wire.NewEvent(wire.EventStarted, wire.StartedData{EventBase: base, SessionID: sid})
	case 1:
		e = wire.NewEvent(wire.EventDelta, wire.DeltaData{EventBase: base, Index: 0, Text: "word "})
	default:
		e = wire.NewEvent(wire.EventCompleted, wire.CompletedData{EventBase: base})
	}
	return Message{Session: sk(sid), TurnID: base.TurnID, Token: 1, Event: e}
}

// benchPublishMany runs PublishMany on next(op) per op and reports events/s and, when Redis is on
// this machine, Redis CPU time per event. Building the messages is outside the timer.
func benchPublishMany(ctx context.Context, b *testing.B, rdb redis.UniversalClient, p *Publisher, next func(op int) []Message) {
	b.Helper()
	b.ReportAllocs()
	cpu := redisCPU(ctx, rdb)
	before := cpu()
	var took time.Duration
	n := 0
	for op := 0; b.Loop(); op++ {
		b.StopTimer()
		ms := next(op)
		b.StartTimer()
		start := time.Now()
		for _, r := range p.PublishMany(ctx, ms) {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
		}
		took += time.Since(start)
		n += len(ms)
	}
	b.ReportMetric(float64(n)/took.Seconds(), "events/s")
	if after := cpu(); before >= 0 && after >= 0 {
		b.ReportMetric(float64((after-before).Microseconds())/float64(n), "redis-cpu-µs/event")
	}
}

// redisCPU returns a reader of the redis-server process's CPU time (user+system), or one that
// returns -1 when that process is not on this machine (its /proc entry is unreadable).
func redisCPU(ctx context.Context, rdb redis.UniversalClient) func() time.Duration {
	none := func() time.Duration { return -1 }
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return none
	}
	pid := ""
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			pid = v
		}
	}
	if pid == "" {
		return none
	}
	return func() time.Duration {
		stat, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil {
			return -1
		}
		// Fields after the parenthesised command name; utime and stime are the 12th and 13th.
		s := string(stat)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 13 {
			return -1
		}
		utime, err1 := strconv.ParseInt(f[11], 10, 64)
		stime, err2 := strconv.ParseInt(f[12], 10, 64)
		if err1 != nil || err2 != nil {
			return -1
		}
		const tick = 10 * time.Millisecond // USER_HZ is 100 on Linux
		return time.Duration(utime+stime) * tick
	}
}
