package consume

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestDrainingHook: Stop calls Config.Draining as the drain begins, before the grace period, so a
// handler that only waits can hand its turn off at once (the worker passes execute.Executor.Drain).
func TestDrainingHook(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	drained := make(chan struct{})
	started := make(chan struct{}, 1)
	c, b := setup(t, Config{MaxInflight: 1, DrainTimeout: time.Minute, Draining: func() { close(drained) }},
		func(ctx context.Context, _ *kgo.Record) Result {
			started <- struct{}{}
			select {
			case <-drained:
			case <-ctx.Done():
			}
			return HandOff
		})
	b.produce(t, "a")
	require.NoError(t, c.Start(ctx))
	select {
	case <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("the record did not start within 20s")
	}
	stopping := time.Now()
	require.NoError(t, c.Stop(ctx))
	require.Less(t, time.Since(stopping), 20*time.Second, "Stop returned long before the minute of grace")
	require.NoError(t, c.Stop(ctx), "Stop is safe twice, and Draining is called once")
}
