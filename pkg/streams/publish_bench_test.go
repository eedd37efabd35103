package streams

import (
	"context"
	"os"
	"strconv"
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
		if _, err := p.Publish(ctx, "s"+strconv.Itoa(i%64), "t", 1, ev, ""); err != nil {
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
		k := KeysFor(prefix, "s"+strconv.Itoa(i%64))
		if err := rdb.XAdd(ctx, &redis.XAddArgs{
			Stream: k.Events, MaxLen: 10000, Approx: true,
			Values: []any{"type", string(ev.Type), "turn", "t", "data", string(ev.Data), "tp", ""},
		}).Err(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPublishMany is BenchmarkPublish for the worker's batched path: 64 events of 64 sessions
// per op, their fenced scripts pipelined in one round trip (PublishMany). Compare events/s with
// BenchmarkPublish's one event per round trip.
func BenchmarkPublishMany(b *testing.B) {
	ctx := context.Background()
	rdb, prefix := benchRedis(ctx, b)
	p := NewPublisher(rdb, prefix, 10000, time.Hour)
	ev := wire.NewEvent(wire.EventDelta, wire.DeltaData{EventBase: wire.EventBase{TurnID: "t", Attempt: 1}, Index: 0, Text: "word "})
	ms := make([]Message, 64)
	for i := range ms {
		ms[i] = Message{SessionID: "s" + strconv.Itoa(i), TurnID: "t", Token: 1, Event: ev}
	}
	b.ReportAllocs()
	start := time.Now()
	n := 0
	for b.Loop() {
		for _, r := range p.PublishMany(ctx, ms) {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
		}
		n += len(ms)
	}
	b.ReportMetric(float64(n)/time.Since(start).Seconds(), "events/s")
}
