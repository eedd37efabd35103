package config

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRegionSettings(t *testing.T) {
	t.Parallel()
	const twoRegions = `{"regions":[{"code":"euw1","url":"http://a"},{"code":"use1","url":"http://b"}]}`
	t.Run("Defaults", func(t *testing.T) {
		t.Parallel()
		c := Default()
		require.NoError(t, c.Validate())
		l, err := c.Region.Local()
		require.NoError(t, err)
		require.Empty(t, l.Code, "single-region mode")
		require.Nil(t, l.Map)
	})
	t.Run("RegionAndMap", func(t *testing.T) {
		t.Parallel()
		c := Default()
		c.Region = RegionSettings{Code: "euw1", Map: twoRegions}
		require.NoError(t, c.Validate())
		l, err := c.Region.Local()
		require.NoError(t, err)
		require.Equal(t, "euw1", l.Code)
		_, ok := l.Map.Region("use1")
		require.True(t, ok)
	})
	t.Run("Refused", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			s    RegionSettings
			want string
		}{
			{RegionSettings{Code: "EU-1"}, "TURNSTILE_REGION: region code must be"},
			{RegionSettings{Code: "apse2", Map: twoRegions}, `TURNSTILE_REGION: "apse2" is not a region of the region map`},
			{RegionSettings{Map: `{"regions":[]}`}, "TURNSTILE_REGIONS_FILE/TURNSTILE_REGIONS: region map: regions: at least one region"},
			{RegionSettings{Map: twoRegions, MapFile: "/x.json"}, "not both"},
		} {
			c := Default()
			c.Region = tc.s
			require.ErrorContains(t, c.Validate(), tc.want)
		}
	})
}
