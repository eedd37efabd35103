package config

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestConfig(t *testing.T) {
	t.Run("Defaults", func(t *testing.T) {
		c := Default()
		require.NoError(t, c.Validate())
		require.Equal(t, []string{"broker", "intake", "worker", "gateway", "a2a", "aisdk", "langgraph", "notifier"}, c.RoleList())
		require.Equal(t, LeaseTTLDefault, c.LeaseTTL)
		require.Equal(t, []string{"127.0.0.1:9092"}, c.BrokerList())
		require.False(t, c.Auth.Enabled())
	})
	t.Run("FromEnvironment", func(t *testing.T) {
		t.Setenv("TURNSTILE_ROLES", "worker, gateway")
		t.Setenv("TURNSTILE_LEASE_TTL", "4s")
		t.Setenv("TURNSTILE_WORKER_MAX_INFLIGHT", "7")
		c, err := Load()
		require.NoError(t, err)
		require.NoError(t, c.Validate())
		require.Equal(t, []string{"worker", "gateway"}, c.RoleList())
		require.True(t, c.HasRole("gateway"))
		require.False(t, c.HasRole("intake"))
		require.Equal(t, 4*time.Second, c.LeaseTTL)
		require.Equal(t, 7, c.MaxInflight)
	})
	t.Run("BrokersFollowTheEmbeddedBroker", func(t *testing.T) {
		for _, tc := range []struct {
			name, roles, addr, brokers, want string
		}{
			{name: "BrokerRoleMoved", roles: "broker,intake", addr: "127.0.0.1:19092", want: "127.0.0.1:19092"},
			{name: "AllRolesMoved", addr: "127.0.0.1:19092", want: "127.0.0.1:19092"},
			{name: "EveryInterface", roles: "broker", addr: ":19092", want: "127.0.0.1:19092"},
			{name: "EveryInterfaceV4", roles: "broker", addr: "0.0.0.0:19092", want: "127.0.0.1:19092"},
			{name: "EveryInterfaceV6", roles: "broker", addr: "[::]:19092", want: "[::1]:19092"},
			{name: "BrokersSetWin", roles: "broker,intake", addr: "127.0.0.1:19092", brokers: "kafka:9092", want: "kafka:9092"},
			{name: "NoBrokerRole", roles: "worker", addr: "127.0.0.1:19092", want: KafkaBrokersDefault},
			{name: "Unmoved", roles: "broker,worker", want: KafkaBrokersDefault},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Setenv("TURNSTILE_ROLES", tc.roles)
				t.Setenv("TURNSTILE_BROKER_ADDR", tc.addr)
				t.Setenv("TURNSTILE_KAFKA_BROKERS", tc.brokers)
				c, err := Load()
				require.NoError(t, err)
				require.Equal(t, tc.want, c.KafkaBrokers)
			})
		}
	})
	t.Run("MalformedValue", func(t *testing.T) {
		t.Setenv("TURNSTILE_LEASE_TTL", "soon")
		_, err := Load()
		require.ErrorContains(t, err, "TURNSTILE_LEASE_TTL")
	})
	t.Run("ValidateReportsEveryViolation", func(t *testing.T) {
		c := Default()
		c.Roles = "worker,scheduler"
		c.Heartbeat = c.LeaseTTL
		c.MaxAttempts = 0
		c.Auth.Mode = "maybe"
		err := c.Validate()
		require.Error(t, err)
		for _, want := range []string{`unknown role "scheduler"`, "TURNSTILE_HEARTBEAT_INTERVAL", "TURNSTILE_MAX_ATTEMPTS", "TURNSTILE_AUTH"} {
			require.True(t, strings.Contains(err.Error(), want), "missing %q in %v", want, err)
		}
	})
	t.Run("AuthNeedsKeys", func(t *testing.T) {
		c := Default()
		c.Auth.Mode = "on"
		require.ErrorContains(t, c.Validate(), "TURNSTILE_STREAM_TOKEN_KEYS")
		c.Auth.StreamTokenKeys = "k1:MDEyMzQ1Njc4OWFiY2RlZg=="
		require.NoError(t, c.Validate())
		keys, err := c.Auth.Keys()
		require.NoError(t, err)
		require.Equal(t, "k1", keys[0].ID)
		require.Equal(t, []byte("0123456789abcdef"), keys[0].Secret)
	})
	t.Run("MalformedKeyNotEchoed", func(t *testing.T) {
		const secret = "MDEyMzQ1Njc4OWFiY2RlZg=="
		for name, keys := range map[string]string{
			"NoID":        "k1:" + secret + "," + secret,
			"EmptyID":     "k1:" + secret + ",:" + secret,
			"NotBase64ID": "k1:" + secret + ",k2:" + secret + "!",
		} {
			t.Run(name, func(t *testing.T) {
				c := Default()
				c.Auth.Mode = "on"
				c.Auth.StreamTokenKeys = keys
				err := c.Validate()
				require.ErrorContains(t, err, "TURNSTILE_STREAM_TOKEN_KEYS")
				require.NotContains(t, err.Error(), secret[:8], "the secret is echoed")
			})
		}
	})
}

// TestDemoFaultsAllowed checks that the demo agent's fault knobs are refused by default only
// with auth on, and that an operator's setting wins either way.
func TestDemoFaultsAllowed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, auth, faults string
		want               bool
	}{
		{"AutoAuthOff", "off", "auto", true},
		{"AutoAuthOn", "on", "auto", false},
		{"AllowAuthOn", "on", "allow", true},
		{"DenyAuthOff", "off", "deny", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := Config{DemoFaults: tc.faults, Auth: AuthSettings{Mode: tc.auth}}
			if got := c.DemoFaultsAllowed(); got != tc.want {
				t.Errorf("DemoFaultsAllowed = %v, want %v", got, tc.want)
			}
		})
	}
}
