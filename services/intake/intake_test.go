package intake

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/app"
	"github.com/turnstile-run/turnstile/pkg/lifecycle/lifecycletest"
	"github.com/turnstile-run/turnstile/pkg/testenv"
)

func TestIntakeLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	setup := func(t *testing.T) *Intake {
		t.Helper()
		env := testenv.New(t, testenv.Options{Partitions: 1})
		deps := app.NewDeps(env.Config, env.Log)
		t.Cleanup(deps.Close)
		i, err := New(ctx, deps)
		require.NoError(t, err)
		return i
	}

	t.Run("ReadyWhileRunning", func(t *testing.T) {
		t.Parallel()
		i := setup(t)
		require.Error(t, i.Ready())
		require.NoError(t, i.Start(ctx))
		require.NoError(t, i.Ready())
		require.NoError(t, i.Stop(ctx))
		require.Error(t, i.Ready())
		require.Error(t, i.Start(ctx), "a stopped intake has closed its producer")
	})

	t.Run("StopBeforeStart", func(t *testing.T) {
		t.Parallel()
		i := setup(t)
		require.NoError(t, i.Stop(ctx))
		require.NoError(t, i.Stop(ctx))
		require.Error(t, i.Start(ctx))
	})

	t.Run("StartStopStress", func(t *testing.T) {
		t.Parallel()
		lifecycletest.Stress(t, setup(t), lifecycletest.Options{OneShot: true})
	})
}
