package aisdk

import (
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/app"
	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/lifecycle/lifecycletest"
)

func TestAISDKLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// The role opens no connection of its own: default settings and no stores suffice.
	setup := func(t *testing.T) *AISDK {
		t.Helper()
		cfg := config.Default()
		cfg.Roles = "aisdk"
		deps := app.NewDeps(cfg, slog.New(slog.DiscardHandler))
		t.Cleanup(deps.Close)
		return New(deps)
	}

	t.Run("ReadyWhileRunning", func(t *testing.T) {
		t.Parallel()
		a := setup(t)
		require.Error(t, a.Ready())
		require.NoError(t, a.Start(ctx))
		require.NoError(t, a.Ready())
		a.Drain(ctx)
		require.Error(t, a.Ready(), "draining drops readiness")
		require.NoError(t, a.Stop(ctx))
		require.Error(t, a.Start(ctx), "a stopped role does not start again")
	})

	t.Run("StopBeforeStart", func(t *testing.T) {
		t.Parallel()
		a := setup(t)
		require.NoError(t, a.Stop(ctx))
		require.NoError(t, a.Stop(ctx))
		require.Error(t, a.Start(ctx))
	})

	t.Run("StartStopStress", func(t *testing.T) {
		t.Parallel()
		lifecycletest.Stress(t, setup(t), lifecycletest.Options{OneShot: true})
	})
}
