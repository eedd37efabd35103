package api

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/config"
)

func TestConfig(t *testing.T) {
	t.Parallel()
	t.Run("Defaults", func(t *testing.T) {
		t.Parallel()
		var c Config
		c.applyDefaults()
		require.Equal(t, []string{"agent"}, c.Agents().Names(), "one default agent")
		c.Agents = nil
		require.Equal(t, Config{
			Topic: config.TopicDefault, MaxBody: config.MaxBodyDefault,
			DefaultDeadline: config.DefaultDeadlineDefault, MinUsefulTime: config.MinUsefulTimeDefault,
			ProduceTimeout: config.ProduceTimeoutDefault, MaxBacklogAge: config.MaxBacklogAgeDefault,
			TenantRate: config.TenantRateDefault, TenantBurst: 2 * config.TenantRateDefault,
			MaxQueuedTurns: config.MaxQueuedTurnsDefault, IdempotencyTTL: config.IdempotencyTTLDefault,
			RetryAfter: config.RetryAfterDefault, KeyPrefix: config.KeyPrefixDefault,
			RedisTimeout: RedisTimeoutDefault, CheckTimeout: CheckTimeoutDefault,
			LookupTimeout: LookupTimeoutDefault, StatusTimeout: StatusTimeoutDefault,
			KeyTTL: KeyTTLDefault, KeyMissTTL: KeyMissTTLDefault, KeyMissRate: KeyMissRateDefault, KeyMissPerClient: KeyMissPerClientDefault,
			CacheEntries:   CacheEntriesDefault,
			QueuedCountTTL: QueuedCountTTLDefault, RateLeaseTTL: RateLeaseTTLDefault, SchedulesMax: config.SchedulesMaxDefault,
		}, c)
	})
	t.Run("MatchesEnvironmentDefaults", func(t *testing.T) {
		t.Parallel()
		// An empty environment and a zero Config mean the same handler.
		env := config.Default()
		var c Config
		c.applyDefaults()
		require.Equal(t, env.Topic, c.Topic)
		require.Equal(t, env.MaxBody, c.MaxBody)
		require.Equal(t, env.ProduceTimeout, c.ProduceTimeout)
		require.Equal(t, env.Intake.TenantBurst, c.TenantBurst)
		require.Equal(t, env.Intake.RetryAfter, c.RetryAfter)
	})
	t.Run("SetFieldsKept", func(t *testing.T) {
		t.Parallel()
		c := Config{TenantRate: 10, StatusTimeout: time.Minute, CacheEntries: 3}
		c.applyDefaults()
		require.Equal(t, 20, c.TenantBurst, "the burst follows the rate")
		require.Equal(t, time.Minute, c.StatusTimeout)
		require.Equal(t, 3, c.CacheEntries)
	})
}
