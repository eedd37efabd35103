package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestIntakeSettings is not parallel: it sets environment variables.
func TestIntakeSettings(t *testing.T) {
	t.Run("Defaults", func(t *testing.T) {
		c := Default()
		require.NoError(t, c.Validate())
		require.Equal(t, MaxBacklogAgeDefault, c.Intake.MaxBacklogAge)
		require.Equal(t, TenantRateDefault, c.Intake.TenantRate)
		require.Equal(t, 2*TenantRateDefault, c.Intake.TenantBurst)
		require.Equal(t, MaxQueuedTurnsDefault, c.Intake.MaxQueuedTurns)
		require.Equal(t, IdempotencyTTLDefault, c.Intake.IdempotencyTTL)
		require.Equal(t, QueueFlushIntervalDefault, c.Intake.QueueFlushInterval)
		require.Equal(t, RetryAfterDefault, c.Intake.RetryAfter)
		require.Equal(t, RedriveIntervalDefault, c.Intake.RedriveInterval)
		require.Equal(t, AdminJobLeaseDefault, c.Intake.AdminJobLease)
	})
	t.Run("Environment", func(t *testing.T) {
		t.Setenv("TURNSTILE_MAX_BACKLOG_AGE", "45s")
		t.Setenv("TURNSTILE_TENANT_RATE", "7")
		c, err := Load()
		require.NoError(t, err)
		require.Equal(t, 45*time.Second, c.Intake.MaxBacklogAge)
		require.Equal(t, 7, c.Intake.TenantRate)
		require.Equal(t, 14, c.Intake.TenantBurst)
	})
	t.Run("Violations", func(t *testing.T) {
		c := Default()
		c.Intake.MaxBacklogAge = time.Millisecond
		c.Intake.TenantRate = -1
		c.Intake.QueueFlushInterval = time.Minute
		c.Intake.RetryAfter = time.Millisecond
		c.Intake.RedriveInterval = time.Hour
		err := c.Validate()
		require.Error(t, err)
		for _, v := range []string{"TURNSTILE_MAX_BACKLOG_AGE", "TURNSTILE_TENANT_RATE", "TURNSTILE_QUEUE_FLUSH_INTERVAL", "TURNSTILE_RETRY_AFTER", "TURNSTILE_REDRIVE_INTERVAL"} {
			require.Contains(t, err.Error(), v)
		}
	})
}

// TestModelPrices: TURNSTILE_MODEL_PRICES parses model=input/output pairs, and a malformed or
// negative one is a configuration error naming it.
func TestModelPrices(t *testing.T) {
	t.Parallel()
	s := IntakeSettings{ModelPrices: " gpt-x=0.5/1.5 , small=0/0.25"}
	got, err := s.Prices()
	require.NoError(t, err)
	require.Equal(t, map[string]Price{"gpt-x": {0.5, 1.5}, "small": {0, 0.25}}, got)
	for _, bad := range []string{"gpt-x=0.5", "gpt-x=-1/1", "=1/1", "gpt-x=a/b"} {
		_, err := IntakeSettings{ModelPrices: bad}.Prices()
		require.ErrorContains(t, err, "TURNSTILE_MODEL_PRICES", bad)
	}
}
