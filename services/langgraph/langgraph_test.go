package langgraph

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/app"
	"github.com/turnstile-run/turnstile/pkg/lifecycle/lifecycletest"
	"github.com/turnstile-run/turnstile/pkg/testenv"
)

func TestLangGraphLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	setup := func(t *testing.T) *LangGraph {
		t.Helper()
		env := testenv.New(t, testenv.Options{Partitions: 1})
		deps := app.NewDeps(env.Config, env.Log)
		t.Cleanup(deps.Close)
		l, err := New(ctx, deps)
		require.NoError(t, err)
		return l
	}

	t.Run("ReadyWhileRunning", func(t *testing.T) {
		t.Parallel()
		l := setup(t)
		require.Error(t, l.Ready())
		require.NoError(t, l.Start(ctx))
		require.NoError(t, l.Ready())
		l.Drain(ctx)
		require.Error(t, l.Ready(), "a draining replica is not ready")
		require.NoError(t, l.Stop(ctx))
		require.Error(t, l.Start(ctx), "a stopped role has ended its streams for good")
	})

	t.Run("StopBeforeStart", func(t *testing.T) {
		t.Parallel()
		l := setup(t)
		require.NoError(t, l.Stop(ctx))
		require.NoError(t, l.Stop(ctx))
		require.Error(t, l.Start(ctx))
	})

	t.Run("StartStopStress", func(t *testing.T) {
		t.Parallel()
		lifecycletest.Stress(t, setup(t), lifecycletest.Options{OneShot: true})
	})
}
