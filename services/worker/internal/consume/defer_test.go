package consume

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// TestDefer checks a deferred record (the claim found an earlier turn of its session not
// terminal): it is held uncommitted while its session's later records run (the earlier turn's
// record, re-driven, arrives behind it), is handed back when one of them ends, and is committed once
// it runs; with nothing else of its session, it is handed back after a growing pause, not in a
// busy loop.
func TestDefer(t *testing.T) {
	t.Parallel()
	t.Run("BehindItsSessionsLaterRecord", func(t *testing.T) {
		t.Parallel()
		var mu sync.Mutex
		var order []string
		earlierDone := false
		tries := 0
		ran := make(chan struct{})
		handle := func(_ context.Context, rec *kgo.Record) Result {
			mu.Lock()
			defer mu.Unlock()
			switch string(rec.Value) {
			case "later":
				tries++
				if !earlierDone {
					return Defer
				}
				order = append(order, "later")
				close(ran)
			default:
				earlierDone = true
				order = append(order, "earlier")
			}
			return Commit
		}
		c, b := setup(t, Config{MaxInflight: 4}, handle)
		ctx := context.Background()
		require.NoError(t, c.Start(ctx))
		defer func() { require.NoError(t, c.Stop(ctx)) }()
		produceValues(t, b, "s", "later")
		testenv.WaitFor(t, 30*time.Second, "the later turn to be deferred", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return tries > 0
		})
		require.LessOrEqual(t, c.commitPoint(), int64(0), "a deferred record is not committed")
		produceValues(t, b, "s", "earlier")
		select {
		case <-ran:
		case <-time.After(30 * time.Second):
			t.Fatal("the deferred record never ran")
		}
		mu.Lock()
		require.Equal(t, []string{"earlier", "later"}, order)
		// Handed back when "earlier" ended, or by its pause before that: never a busy loop.
		require.LessOrEqual(t, tries, 8)
		mu.Unlock()
		testenv.WaitFor(t, 30*time.Second, "both records to be committed", func() bool { return c.commitPoint() == 2 })
	})
	t.Run("AloneRetriedAfterAPause", func(t *testing.T) {
		t.Parallel()
		var mu sync.Mutex
		var at []time.Time
		ran := make(chan struct{})
		handle := func(_ context.Context, _ *kgo.Record) Result {
			mu.Lock()
			defer mu.Unlock()
			at = append(at, time.Now())
			if len(at) < 3 {
				return Defer
			}
			close(ran)
			return Commit
		}
		c, b := setup(t, Config{MaxInflight: 2}, handle)
		ctx := context.Background()
		require.NoError(t, c.Start(ctx))
		defer func() { require.NoError(t, c.Stop(ctx)) }()
		produceValues(t, b, "s", "only")
		select {
		case <-ran:
		case <-time.After(30 * time.Second):
			t.Fatal("the deferred record was never handed back")
		}
		mu.Lock()
		require.GreaterOrEqual(t, at[1].Sub(at[0]), DeferPauseFirst)
		require.GreaterOrEqual(t, at[2].Sub(at[1]), 2*DeferPauseFirst, "the pause grows")
		mu.Unlock()
		testenv.WaitFor(t, 30*time.Second, "the record to be committed", func() bool { return c.commitPoint() == 1 })
	})
}

// produceValues produces records of session key with the given values, in order, to partition 0.
func produceValues(t *testing.T, b *bundle, key string, values ...string) {
	t.Helper()
	recs := make([]*kgo.Record, len(values))
	for i, v := range values {
		recs[i] = &kgo.Record{Key: []byte(key), Value: []byte(v)}
	}
	require.NoError(t, b.producer.ProduceSync(context.Background(), recs...).FirstErr())
}
