package stack

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/turnstile-run/turnstile/pkg/app"
	"github.com/turnstile-run/turnstile/pkg/lifecycle/lifecycletest"
	"github.com/turnstile-run/turnstile/pkg/testenv"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// go-redis and pgx keep pool reapers that end asynchronously after Close.
		goleak.IgnoreTopFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).backgroundHealthCheck"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).reaper"),
	)
}

func TestStack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("StartServesStopCleansUp", func(t *testing.T) {
		t.Parallel()
		env := testenv.New(t, testenv.Options{Partitions: 1})
		cfg := env.Config
		s, err := Start(ctx, cfg, "intake,worker,gateway", env.Log)
		require.NoError(t, err)
		require.NoError(t, s.StartWorker(ctx, "w2"))
		resp, err := http.Get(s.URL + "/healthz")
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Len(t, s.WorkerMetrics(), 1)
		require.NoError(t, s.Stop(ctx, false))
	})
}

func TestProcess(t *testing.T) {
	t.Parallel()
	t.Run("StartStopStress", func(t *testing.T) {
		t.Parallel()
		env := testenv.New(t, testenv.Options{Partitions: 1})
		cfg := env.Config
		cfg.Roles = "intake,worker,gateway"
		p := NewProcess(app.NewDeps(cfg, env.Log))
		lifecycletest.Stress(t, p, lifecycletest.Options{OneShot: true})
	})
	t.Run("StopBeforeStart", func(t *testing.T) {
		t.Parallel()
		env := testenv.New(t, testenv.Options{Partitions: 1})
		p := NewProcess(app.NewDeps(env.Config, env.Log))
		require.NoError(t, p.Stop(context.Background()))
		require.NoError(t, p.Stop(context.Background()))
		require.Error(t, p.Start(context.Background()))
	})
	t.Run("StartsAndServes", func(t *testing.T) {
		t.Parallel()
		env := testenv.New(t, testenv.Options{Partitions: 1})
		p := NewProcess(app.NewDeps(env.Config, env.Log))
		require.Empty(t, p.URL())
		require.NoError(t, p.Start(context.Background()))
		resp, err := http.Get(p.URL() + "/healthz")
		require.NoError(t, err)
		resp.Body.Close()
		require.NoError(t, p.Stop(context.Background()))
		require.NoError(t, p.Stop(context.Background()))
	})
}
