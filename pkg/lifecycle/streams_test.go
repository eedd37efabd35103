package lifecycle_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/lifecycle"
)

func stopped(s *lifecycle.Stream) bool {
	select {
	case <-s.Done():
		return true
	default:
		return false
	}
}

func TestStreams(t *testing.T) {
	t.Parallel()
	t.Run("Defaults", func(t *testing.T) {
		t.Parallel()
		var ss lifecycle.Streams
		require.Zero(t, ss.Len())
		require.False(t, ss.Draining())
		require.NoError(t, ss.Wait(context.Background()), "nothing tracked: nothing to wait for")
		ss.Drain(context.Background()) // nothing open: returns at once
		require.True(t, ss.Draining())
	})

	t.Run("TrackRelease", func(t *testing.T) {
		t.Parallel()
		var ss lifecycle.Streams
		a, b := ss.Track(nil), ss.Track(nil)
		require.Equal(t, 2, ss.Len())
		require.False(t, stopped(a) || stopped(b))
		a.Release()
		require.Equal(t, 1, ss.Len())
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		require.Error(t, ss.Wait(ctx), "one stream is still tracked")
		b.Release()
		require.NoError(t, ss.Wait(context.Background()))
		require.Zero(t, ss.Len())
	})

	t.Run("CutKeepsServing", func(t *testing.T) {
		t.Parallel()
		var ss lifecycle.Streams
		var told atomic.Int32
		a := ss.Track(func() { told.Add(1) })
		ss.Cut()
		require.True(t, stopped(a))
		require.Equal(t, int32(1), told.Load())
		ss.Cut() // once told, never again
		require.Equal(t, int32(1), told.Load())
		later := ss.Track(nil)
		require.False(t, stopped(later), "after a cut new streams are served")
		require.False(t, ss.Draining())
		a.Release()
		later.Release()
	})

	t.Run("DrainEndsLaterStreamsAtOnce", func(t *testing.T) {
		t.Parallel()
		var ss lifecycle.Streams
		a := ss.Track(nil)
		ss.Drain(context.Background())
		require.True(t, stopped(a))
		var told atomic.Bool
		later := ss.Track(func() { told.Store(true) })
		require.True(t, stopped(later), "a stream tracked while draining ends at once")
		require.True(t, told.Load(), "and its onStop ran before Track returned")
		require.Equal(t, 2, ss.Len(), "until released, it is still tracked")
		a.Release()
		later.Release()
		require.NoError(t, ss.Wait(context.Background()))
	})

	t.Run("DrainBatches", func(t *testing.T) {
		t.Parallel()
		ss := lifecycle.Streams{DrainBatch: 2, DrainInterval: time.Hour}
		const n = 5
		open := make([]*lifecycle.Stream, n)
		for i := range open {
			open[i] = ss.Track(nil)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); ss.Drain(ctx) }()
		// The first batch is told at once; the next waits for an interval of an hour.
		require.Eventually(t, func() bool { return count(open) == 2 }, 10*time.Second, time.Millisecond)
		select {
		case <-done:
			t.Fatal("Drain returned before telling every stream")
		default:
		}
		require.Equal(t, 2, count(open), "one batch at a time")
		// The caller's deadline ends the spread: the rest are told at once.
		cancel()
		<-done
		require.Equal(t, n, count(open))
		for _, s := range open {
			s.Release()
		}
	})
}

func count(ss []*lifecycle.Stream) int {
	n := 0
	for _, s := range ss {
		if stopped(s) {
			n++
		}
	}
	return n
}
