package lifecycle

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestLoop(t *testing.T) {
	t.Parallel()
	t.Run("StopBeforeStartThenRestart", func(t *testing.T) {
		t.Parallel()
		var l Loop
		require.NoError(t, l.Stop(context.Background(), "x"), "Stop before Start is a no-op")
		for range 3 {
			ran := make(chan struct{})
			l.Start(context.Background(), func(ctx context.Context) { close(ran); <-ctx.Done() })
			<-ran
			require.NoError(t, l.Stop(context.Background(), "x"))
		}
	})
	t.Run("StartStopTwice", func(t *testing.T) {
		t.Parallel()
		var l Loop
		starts := make(chan struct{}, 2)
		run := func(ctx context.Context) { starts <- struct{}{}; <-ctx.Done() }
		l.Start(context.Background(), run)
		l.Start(context.Background(), run)
		<-starts
		require.NoError(t, l.Stop(context.Background(), "x"))
		require.NoError(t, l.Stop(context.Background(), "x"))
		require.Len(t, starts, 0, "the second Start ran nothing")
	})
	t.Run("DetachedFromStartContext", func(t *testing.T) {
		t.Parallel()
		var l Loop
		ctx, cancel := context.WithCancel(context.Background())
		running := make(chan struct{})
		ended := make(chan struct{})
		l.Start(ctx, func(ctx context.Context) { close(running); <-ctx.Done(); close(ended) })
		<-running
		cancel()
		select {
		case <-ended:
			t.Fatal("cancelling Start's context must not stop the loop")
		default:
		}
		require.NoError(t, l.Stop(context.Background(), "x"))
		<-ended
	})
	t.Run("StopGivesUp", func(t *testing.T) {
		t.Parallel()
		var l Loop
		release := make(chan struct{})
		l.Start(context.Background(), func(context.Context) { <-release })
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		require.ErrorContains(t, l.Stop(ctx, "stuck thing"), "stop stuck thing")
		close(release)
		require.NoError(t, l.Stop(context.Background(), "x"))
	})
}

func TestEvery(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		Every(ctx, time.Millisecond, func(fctx context.Context) {
			assert.Equal(t, ctx, fctx, "fn gets Every's context")
			calls++
			if calls == 3 {
				cancel()
			}
		})
	}()
	<-returned
	require.Equal(t, 3, calls, "fn ran on every tick until the context ended, and not once after")
}
