package vacuum

import (
	"testing"

	"github.com/turnstile-run/turnstile/pkg/lifecycle/lifecycletest"
	"github.com/turnstile-run/turnstile/pkg/testenv"
)

func TestVacuumerStartStop(t *testing.T) {
	t.Parallel()
	t.Run("StartStopStress", func(t *testing.T) {
		t.Parallel()
		env := testenv.New(t, testenv.Options{Partitions: 1})
		lifecycletest.Stress(t, New(env.Pool, Config{}, env.Log), lifecycletest.Options{})
	})
}
