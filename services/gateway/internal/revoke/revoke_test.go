package revoke

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeSource answers with ids, or err when set.
type fakeSource struct {
	mu  sync.Mutex
	ids []string
	err error
}

func (f *fakeSource) set(ids []string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ids, f.err = ids, err
}

func (f *fakeSource) RevokedWithin(context.Context, time.Duration) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.ids...), f.err
}

func setup(t *testing.T) (*Watcher, *fakeSource) {
	t.Helper()
	src := &fakeSource{}
	w := New(Config{Window: time.Hour, Interval: 5 * time.Millisecond}, src, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, w.Stop(ctx))
	})
	return w, src
}

// waitRead waits for a read that started after the call.
func waitRead(t *testing.T, w *Watcher) {
	t.Helper()
	next := w.nextRead()
	select {
	case <-next:
	case <-time.After(10 * time.Second):
		t.Fatal("no read")
	}
	next = w.nextRead() // the one in flight may have started before the change: wait one more
	select {
	case <-next:
	case <-time.After(10 * time.Second):
		t.Fatal("no read")
	}
}

func TestWatcher(t *testing.T) {
	t.Parallel()
	t.Run("Defaults", func(t *testing.T) {
		t.Parallel()
		w := New(Config{Window: time.Hour}, &fakeSource{}, slog.Default())
		require.Equal(t, IntervalDefault, w.cfg.Interval)
		require.Equal(t, ReadTimeoutDefault, w.cfg.ReadTimeout)
	})
	t.Run("RevocationSignalsChange", func(t *testing.T) {
		t.Parallel()
		w, src := setup(t)
		require.NoError(t, w.Start(context.Background()))
		changed := w.Changed()
		require.False(t, w.Revoked("k1"))
		src.set([]string{"k1"}, nil)
		select {
		case <-changed:
		case <-time.After(10 * time.Second):
			t.Fatal("no change signalled")
		}
		require.True(t, w.Revoked("k1"))
		require.False(t, w.Revoked("k2"))
		require.False(t, w.Revoked(""))
	})
	t.Run("FailedReadKeepsKnown", func(t *testing.T) {
		t.Parallel()
		w, src := setup(t)
		src.set([]string{"k1"}, nil)
		require.NoError(t, w.Start(context.Background()))
		waitRead(t, w)
		src.set(nil, errors.New("postgres down"))
		waitRead(t, w)
		require.True(t, w.Revoked("k1"), "a failed read forgets nothing")
		src.set([]string{"k1", "k2"}, nil)
		waitRead(t, w)
		require.True(t, w.Revoked("k2"), "revocations made during the outage arrive when it ends")
	})
	t.Run("NilWatcher", func(t *testing.T) {
		t.Parallel()
		var w *Watcher
		require.False(t, w.Revoked("k1"))
		require.Nil(t, w.Changed())
	})
	t.Run("StartStopStress", func(t *testing.T) {
		t.Parallel()
		w, _ := setup(t)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, w.Stop(ctx), "before Start")
		for range 20 {
			require.NoError(t, w.Start(ctx))
			require.NoError(t, w.Stop(ctx))
			require.NoError(t, w.Stop(ctx))
		}
	})
}
