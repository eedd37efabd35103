package config

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRouterSettings(t *testing.T) {
	t.Run("Defaults", func(t *testing.T) {
		c := Default()
		require.Equal(t, RouterSettings{
			ConnectTimeout: RouterConnectTimeoutDefault, ProbeInterval: RouterProbeIntervalDefault,
			ProbeTimeout: RouterProbeTimeoutDefault, ProbeRise: RouterProbeRiseDefault, ProbeFall: RouterProbeFallDefault,
			ProbePath: RouterProbePathDefault, RetryAfter: RouterRetryAfterDefault, IdleConns: RouterIdleConnsDefault,
		}, c.Router)
		require.False(t, c.HasRole("router"), "the default roles serve the API, so the router is not among them")
	})
	t.Run("RunsAlone", func(t *testing.T) {
		c := Default()
		c.Roles = "router"
		require.NoError(t, c.Validate())
		c.Roles = "router,intake,a2a"
		err := c.Validate()
		require.ErrorContains(t, err, "router forwards every path, so it runs without intake")
		require.ErrorContains(t, err, "router forwards every path, so it runs without a2a")
	})
	t.Run("Bounds", func(t *testing.T) {
		c := Default()
		c.Router.ProbeRise = -1
		c.Router.ProbePath = "readyz"
		c.Router.RetryAfter = 10
		err := c.Validate()
		for _, want := range []string{"TURNSTILE_ROUTER_PROBE_RISE", "TURNSTILE_ROUTER_PROBE_PATH", "TURNSTILE_ROUTER_RETRY_AFTER"} {
			require.ErrorContains(t, err, want)
		}
	})
}
