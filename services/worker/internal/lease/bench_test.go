package lease

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/pkg/turnstore"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

// BenchmarkClaimComplete claims and completes turns of distinct sessions, one statement each per
// batch, at several batch sizes; batch=1 is the one-round-trip-per-turn path (Claim, Complete). The
// figure to compare is turns/s: what one connection gets through when the rows share a statement
// and a commit.
func BenchmarkClaimComplete(b *testing.B) {
	for _, size := range []int{1, 16, 128} {
		b.Run("batch="+strconv.Itoa(size), func(b *testing.B) {
			env := testenv.New(b, testenv.Options{Partitions: 1})
			s := NewStore(env.Pool, "bench", time.Minute, 3)
			ctx := context.Background()
			b.ReportAllocs()
			n := 0
			start := time.Now()
			for i := 0; b.Loop(); i++ {
				reqs := make([]ClaimRequest, size)
				for k := range reqs {
					reqs[k] = request("bench-" + strconv.Itoa(i) + "-" + strconv.Itoa(k))
				}
				cs := make([]Completion, size)
				if size == 1 {
					c, err := s.Claim(ctx, reqs[0])
					if err != nil || c.Outcome != turnstore.ClaimAcquired {
						b.Fatal(c.Outcome, err)
					}
					if err := s.Complete(ctx, reqs[0].Env.TurnID, c.Token, wire.Output{Text: "ok"}); err != nil {
						b.Fatal(err)
					}
					n++
					continue
				}
				for k, r := range s.ClaimMany(ctx, reqs) {
					if r.Err != nil || r.Val.Outcome != turnstore.ClaimAcquired {
						b.Fatal(r.Val.Outcome, r.Err)
					}
					cs[k] = Completion{TurnID: reqs[k].Env.TurnID, Token: r.Val.Token, Output: wire.Output{Text: "ok"}}
				}
				for _, r := range s.CompleteMany(ctx, cs) {
					if r.Err != nil {
						b.Fatal(r.Err)
					}
				}
				n += size
			}
			b.ReportMetric(float64(n)/time.Since(start).Seconds(), "turns/s")
		})
	}
}
