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
	require.Nil(t, c.Ops.TraceSampleRatio)
	require.NoError(t, c.Validate())

	c.Ops.OTLPEndpoint = "http://otel-collector:4318"
	require.NoError(t, c.Validate())

	one, over := 1.0, 1.5
	for _, bad := range []OpsSettings{
		{BacklogInterval: time.Millisecond, TraceSampleRatio: &one},
		{BacklogInterval: time.Second, TraceSampleRatio: &over},
		{BacklogInterval: time.Second, TraceSampleRatio: &one, OTLPEndpoint: "otel-collector:4318"},
	} {
		c := Default()
		c.Ops = bad
		require.Error(t, c.Validate(), "%+v", bad)
	}
}
