package pool

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/turnstile-run/turnstile/services/worker/internal/agent"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/upstream"
)

// BenchmarkPick measures a turn's pick (Pick and Finished) over 64 endpoints, for 4096 sessions,
// beside a plain random pick of one of the 64; the ratio is reported as x-random.
func BenchmarkPick(b *testing.B) {
	for _, policy := range []Policy{Affinity, LeastRequest} {
		b.Run(string(policy), func(b *testing.B) {
			p := New(Config{Policy: policy, Log: slog.New(slog.DiscardHandler)}, Static(addrs(64)))
			turns := make([]agent.Turn, 4096)
			for i := range turns {
				turns[i] = agent.Turn{TurnID: "t", SessionID: fmt.Sprintf("s-%d", i), Tenant: "acme", Attempt: 1}
			}
			ctx := b.Context()
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for i := range b.N {
				tg, err := p.Pick(ctx, turns[i%len(turns)], nil, nil)
				if err != nil {
					b.Fatal(err)
				}
				tg.Finished(upstream.Terminal, nil, 0)
			}
			picked := time.Since(start)
			b.StopTimer()
			eps := p.st.Load().all
			var sink *Endpoint
			start = time.Now()
			for range b.N {
				ep := eps[rand.IntN(len(eps))]
				ep.inflight.Add(1)
				ep.inflight.Add(-1)
				sink = ep
			}
			random := time.Since(start)
			_ = sink
			b.ReportMetric(float64(random.Nanoseconds())/float64(b.N), "random-ns/op")
			b.ReportMetric(float64(picked)/float64(max(random, 1)), "x-random")
		})
	}
}
