package a2a

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/app"
	"github.com/turnstile-run/turnstile/pkg/config"
)

func newServer(t *testing.T) *Server {
	t.Helper()
	d := app.NewDeps(config.Default(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	d.Registry = prometheus.NewRegistry()
	s, err := New(d)
	require.NoError(t, err)
	return s
}

func TestServer(t *testing.T) {
	t.Parallel()
	t.Run("Defaults", func(t *testing.T) {
		s := newServer(t)
		require.Error(t, s.Ready(), "not ready before Start")
		require.Equal(t, 0, s.Streams())
	})
	t.Run("StartStop", func(t *testing.T) {
		s := newServer(t)
		require.NoError(t, s.Stop(context.Background()), "Stop before Start")
		require.Error(t, s.Start(context.Background()), "Start after Stop")
		s = newServer(t)
		require.NoError(t, s.Start(context.Background()))
		require.NoError(t, s.Ready())
		s.Drain(context.Background())
		require.Error(t, s.Ready(), "draining drops readiness")
		require.NoError(t, s.Stop(context.Background()))
		require.NoError(t, s.Stop(context.Background()), "Stop twice")
	})
	t.Run("StartStopStress", func(t *testing.T) {
		s := newServer(t)
		require.NoError(t, s.Start(context.Background()))
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = s.Start(context.Background())
				require.NoError(t, s.Stop(context.Background()))
			}()
		}
		wg.Wait()
		require.Error(t, s.Ready())
	})
}
