package worker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/app"
	"github.com/turnstile-run/turnstile/pkg/lifecycle/lifecycletest"
	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// setup builds a worker over a fresh test environment, with its configuration changed by tweak.
func setup(t *testing.T, tweak func(*testenv.Env)) *Worker {
	t.Helper()
	env := testenv.New(t, testenv.Options{Partitions: 2})
	if tweak != nil {
		tweak(env)
	}
	deps := app.NewDeps(env.Config, env.Log)
	t.Cleanup(deps.Close)
	w, err := New(context.Background(), deps)
	require.NoError(t, err)
	return w
}

func TestWorkerLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("StartReturnsAtOnceWithoutKafka", func(t *testing.T) {
		t.Parallel()
		w := setup(t, func(env *testenv.Env) { env.Config.KafkaBrokers = testenv.FreeAddr(t) })
		require.ErrorContains(t, w.Ready(), "not running")
		started := make(chan error, 1)
		go func() { started <- w.Start(ctx) }()
		select {
		case err := <-started:
			require.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Fatal("Start waited for an unreachable Kafka instead of reporting it through readiness")
		}
		err := w.Ready()
		require.ErrorContains(t, err, "waiting for kafka", "not ready, and why")
		require.NoError(t, w.Stop(ctx))
	})

	t.Run("ReadyOnceKafkaAnswers", func(t *testing.T) {
		t.Parallel()
		w := setup(t, nil)
		require.NoError(t, w.Start(ctx))
		testenv.WaitFor(t, 15*time.Second, "the worker to be ready", func() bool { return w.Ready() == nil })
		require.NoError(t, w.Stop(ctx))
		require.ErrorContains(t, w.Ready(), "not running", "a stopped worker is not ready")
	})

	t.Run("StopBeforeStart", func(t *testing.T) {
		t.Parallel()
		w := setup(t, nil)
		require.NoError(t, w.Stop(ctx))
		require.NoError(t, w.Stop(ctx))
		require.Error(t, w.Start(ctx), "a stopped worker does not start again")
	})

	t.Run("StartStopStress", func(t *testing.T) {
		t.Parallel()
		lifecycletest.Stress(t, setup(t, nil), lifecycletest.Options{OneShot: true})
	})
}
