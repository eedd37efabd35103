package health

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/lifecycle/lifecycletest"
)

const waitTimeout = 10 * time.Second

type probe struct {
	code   string
	ok, up bool
}

// bundle is a Monitor over one fake region whose readiness the test switches, and the probes it
// made, in order.
type bundle struct {
	m      *Monitor
	ready  atomic.Bool
	probes chan probe
	reg    *prometheus.Registry
}

func setup(t *testing.T, cfg Config) *bundle {
	t.Helper()
	b := &bundle{probes: make(chan probe, 1000), reg: prometheus.NewRegistry()}
	b.ready.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "/readyz", r.URL.Path)
		if !b.ready.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(srv.Close)
	if cfg.Interval == 0 {
		cfg.Interval = 5 * time.Millisecond
	}
	cfg.OnProbe = func(code string, ok, up bool) { b.probes <- probe{code, ok, up} }
	b.m = New(cfg, []Region{{Code: "euw1", URL: srv.URL + "/"}}, srv.Client(), slog.New(slog.DiscardHandler), b.reg)
	t.Cleanup(func() { require.NoError(t, b.m.Stop(context.Background())) })
	return b
}

func (b *bundle) next(t *testing.T) probe {
	t.Helper()
	select {
	case p := <-b.probes:
		return p
	case <-time.After(waitTimeout):
		t.Fatal("no probe")
		return probe{}
	}
}

func (b *bundle) gauge() float64 {
	return testutil.ToFloat64(b.m.gauge.WithLabelValues("euw1"))
}

func TestMonitor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("Defaults", func(t *testing.T) {
		t.Parallel()
		var c Config
		c.applyDefaults()
		require.Equal(t, Config{
			Interval: config.RouterProbeIntervalDefault, Timeout: config.RouterProbeTimeoutDefault, Rise: config.RouterProbeRiseDefault,
			Fall: config.RouterProbeFallDefault, Path: config.RouterProbePathDefault,
		}, c)
	})

	t.Run("StartsUp", func(t *testing.T) {
		t.Parallel()
		b := setup(t, Config{})
		require.True(t, b.m.Up("euw1"), "a region is up before its first probe")
		require.False(t, b.m.Up("use1"), "an unknown region is never up")
		require.Equal(t, 1.0, b.gauge())
	})

	t.Run("FallThenRise", func(t *testing.T) {
		t.Parallel()
		b := setup(t, Config{Rise: 3, Fall: 2})
		require.NoError(t, b.m.Start(ctx))
		require.Equal(t, probe{"euw1", true, true}, b.next(t))
		b.ready.Store(false)
		// Probes already in flight may still see it ready: skip to the first failure.
		p := b.next(t)
		for p.ok {
			p = b.next(t)
		}
		require.Equal(t, probe{"euw1", false, true}, p, "one failed probe is not enough")
		require.Equal(t, probe{"euw1", false, false}, b.next(t), "the second takes it down")
		require.False(t, b.m.Up("euw1"))
		require.Equal(t, 0.0, b.gauge())
		b.ready.Store(true)
		p = b.next(t)
		for !p.ok {
			p = b.next(t)
		}
		require.Equal(t, probe{"euw1", true, false}, p)
		require.Equal(t, probe{"euw1", true, false}, b.next(t), "two good probes are not enough")
		require.Equal(t, probe{"euw1", true, true}, b.next(t), "the third brings it back")
		require.True(t, b.m.Up("euw1"))
		require.Equal(t, 1.0, b.gauge())
	})

	t.Run("FailedForwardIsImmediate", func(t *testing.T) {
		t.Parallel()
		b := setup(t, Config{Rise: 2})
		b.m.Failed("euw1", errors.New("connection refused"))
		require.False(t, b.m.Up("euw1"), "a failed forward takes the region down before any probe")
		require.Equal(t, 0.0, b.gauge())
		b.m.Failed("nowhere", errors.New("ignored"))
		require.NoError(t, b.m.Start(ctx))
		require.Equal(t, probe{"euw1", true, false}, b.next(t))
		require.Equal(t, probe{"euw1", true, true}, b.next(t), "good probes bring it back")
	})

	t.Run("HungRegionBoundedByTimeout", func(t *testing.T) {
		t.Parallel()
		release := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
		t.Cleanup(srv.Close)
		t.Cleanup(func() { close(release) })
		probes := make(chan probe, 100)
		cfg := Config{
			Interval: 5 * time.Millisecond, Timeout: 20 * time.Millisecond, Fall: 1,
			OnProbe: func(code string, ok, up bool) { probes <- probe{code, ok, up} },
		}
		m := New(cfg, []Region{{Code: "hung", URL: srv.URL}}, srv.Client(), slog.New(slog.DiscardHandler), prometheus.NewRegistry())
		require.NoError(t, m.Start(ctx))
		select {
		case p := <-probes:
			require.Equal(t, probe{"hung", false, false}, p)
		case <-time.After(waitTimeout):
			t.Fatal("a hung probe was not bounded")
		}
		require.NoError(t, m.Stop(ctx))
	})

	t.Run("StartStopStress", func(t *testing.T) {
		t.Parallel()
		lifecycletest.Stress(t, setup(t, Config{}).m, lifecycletest.Options{})
	})
}
