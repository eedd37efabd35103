package sse

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/config"
)

func TestConfig(t *testing.T) {
	t.Parallel()
	t.Run("Defaults", func(t *testing.T) {
		t.Parallel()
		var c Config
		c.applyDefaults()
		require.Equal(t, Config{
			KeepAlive: config.KeepAliveDefault, Retry: config.GatewayRetryDefault,
			OverloadRetry: config.GatewayOverloadRetryDefault, ReplayBatch: ReplayBatchDefault,
			MaxConnections: config.GatewayMaxConnectionsDefault, MaxPerSession: config.GatewayMaxPerSessionDefault,
			MaxTenantShare: config.GatewayMaxTenantShareDefault,
			DrainBatch:     config.GatewayDrainBatchDefault, DrainInterval: config.GatewayDrainIntervalDefault,
			WriteTimeout: config.GatewayWriteTimeoutDefault,
		}, c)
	})
	t.Run("SetFieldsKept", func(t *testing.T) {
		t.Parallel()
		c := Config{MaxPerSession: 2, ReplayBatch: 7}
		c.applyDefaults()
		require.Equal(t, 2, c.MaxPerSession)
		require.EqualValues(t, 7, c.ReplayBatch)
	})
}
