package lease

import (
	"testing"
	"time"

	"github.com/turnstile-run/turnstile/pkg/lifecycle/lifecycletest"
	"github.com/turnstile-run/turnstile/pkg/testenv"
)

func TestRenewerLifecycle(t *testing.T) {
	t.Parallel()
	t.Run("StartStopStress", func(t *testing.T) {
		t.Parallel()
		env := testenv.New(t, testenv.Options{Partitions: 1})
		store := NewStore(env.Pool, "r", time.Second, 3)
		lifecycletest.Stress(t, NewRenewer(store, 10*time.Millisecond, env.Log), lifecycletest.Options{})
	})
}
