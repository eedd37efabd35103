package notifier

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/app"
	"github.com/turnstile-run/turnstile/pkg/lifecycle/lifecycletest"
	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// TestNotifierLifecycle: the claim loop starts again after Stop (the notifier closes nothing it
// cannot reopen), under concurrent starts and stops.
func TestNotifierLifecycle(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 1})
	deps := app.NewDeps(env.Config, env.Log)
	t.Cleanup(deps.Close)
	n, err := New(context.Background(), deps)
	require.NoError(t, err)
	lifecycletest.Stress(t, n, lifecycletest.Options{})
}
