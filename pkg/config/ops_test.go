package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestOpsSettings(t *testing.T) {
	t.Parallel()
	c := Default()
	require.Equal(t, time.Second, c.Ops.BacklogInterval)
	require.Empty(t, c.Ops.OTLPEndpoint, "trace export is off by default")
	require.Equal(t, 1.0, c.Ops.TraceSampleRatio)
	require.NoError(t, c.Validate())

	c.Ops.OTLPEndpoint = "http://otel-collector:4318"
	require.NoError(t, c.Validate())
	for _, bad := range []OpsSettings{
		{BacklogInterval: time.Millisecond, TraceSampleRatio: 1},
		{BacklogInterval: time.Second, TraceSampleRatio: 1.5},
		{BacklogInterval: time.Second, TraceSampleRatio: 1, OTLPEndpoint: "otel-collector:4318"},
	} {
		c := Default()
		c.Ops = bad
		require.Error(t, c.Validate(), "%+v", bad)
	}
}
