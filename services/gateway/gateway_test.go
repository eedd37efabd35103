package gateway

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/app"
	"github.com/turnstile-run/turnstile/pkg/lifecycle/lifecycletest"
	"github.com/turnstile-run/turnstile/pkg/testenv"
)

func TestGatewayLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	setup := func(t *testing.T) *Gateway {
		t.Helper()
		env := testenv.New(t, testenv.Options{Partitions: 1})
		deps := app.NewDeps(env.Config, env.Log)
		t.Cleanup(deps.Close)
		g, err := New(deps)
		require.NoError(t, err)
		return g
	}

	t.Run("ReadyWhileRunning", func(t *testing.T) {
		t.Parallel()
		g := setup(t)
		require.Error(t, g.Ready())
		require.NoError(t, g.Start(ctx))
		require.NoError(t, g.Ready())
		require.NoError(t, g.Stop(ctx))
		require.Error(t, g.Ready())
		require.Error(t, g.Start(ctx), "a stopped gateway has drained for good")
	})

	t.Run("StopBeforeStart", func(t *testing.T) {
		t.Parallel()
		g := setup(t)
		require.NoError(t, g.Stop(ctx))
		require.NoError(t, g.Stop(ctx))
		require.Error(t, g.Start(ctx))
	})

	t.Run("StartStopStress", func(t *testing.T) {
		t.Parallel()
		lifecycletest.Stress(t, setup(t), lifecycletest.Options{OneShot: true})
	})
}
