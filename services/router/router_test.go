package router

import (
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/app"
	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/lifecycle/lifecycletest"
)

func TestRouterLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// The role opens no connection until it forwards or probes: a map of unreachable regions does.
	deps := func(t *testing.T, regions string) *app.Deps {
		t.Helper()
		cfg := config.Default()
		cfg.Roles = "router"
		cfg.Region.Map = regions
		d := app.NewDeps(cfg, slog.New(slog.DiscardHandler))
		t.Cleanup(d.Close)
		return d
	}
	const regions = `{"regions": [{"code": "euw1", "url": "http://127.0.0.1:1"}, {"code": "use1", "url": "http://127.0.0.1:2"}]}`
	setup := func(t *testing.T) *Router {
		t.Helper()
		r, err := New(deps(t, regions))
		require.NoError(t, err)
		return r
	}

	t.Run("NeedsAMap", func(t *testing.T) {
		t.Parallel()
		_, err := New(deps(t, ""))
		require.ErrorContains(t, err, "no region map")
		_, err = New(deps(t, `{"regions": []}`))
		require.ErrorContains(t, err, "at least one region")
	})

	t.Run("ReadyWhileRunning", func(t *testing.T) {
		t.Parallel()
		r := setup(t)
		require.Error(t, r.Ready())
		require.NoError(t, r.Start(ctx))
		require.NoError(t, r.Ready(), "regions being down does not make the router unready")
		r.Drain(ctx)
		require.Error(t, r.Ready(), "draining drops readiness")
		require.NoError(t, r.Stop(ctx))
		require.Error(t, r.Start(ctx), "a stopped role does not start again")
	})

	t.Run("StopBeforeStart", func(t *testing.T) {
		t.Parallel()
		r := setup(t)
		require.NoError(t, r.Stop(ctx))
		require.NoError(t, r.Stop(ctx))
		require.Error(t, r.Start(ctx))
	})

	t.Run("StartStopStress", func(t *testing.T) {
		t.Parallel()
		lifecycletest.Stress(t, setup(t), lifecycletest.Options{OneShot: true})
	})
}
