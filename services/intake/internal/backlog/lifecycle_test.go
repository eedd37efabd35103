package backlog_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnstile-run/turnstile/pkg/lifecycle/lifecycletest"
	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/services/intake/internal/backlog"
)

func TestMonitorLifecycle(t *testing.T) {
	t.Parallel()
	t.Run("StartStopStress", func(t *testing.T) {
		t.Parallel()
		env := testenv.New(t, testenv.Options{Partitions: 1})
		m := backlog.New(backlog.Config{Interval: 10 * time.Millisecond}, env.Pool, env.Log, prometheus.NewRegistry())
		lifecycletest.Stress(t, m, lifecycletest.Options{})
	})
}
