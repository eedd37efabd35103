package config

import (
	"fmt"

	"github.com/turnstile-run/turnstile/pkg/region"
)

// RegionSettings place this process in a multi-region deployment (pkg/region). All unset is
// single-region mode: IDs carry no prefix and nothing is checked against other regions.
type RegionSettings struct {
	// Code is this region's code, [a-z][a-z0-9]{1,7} (e.g. euw1); every ID the region mints
	// starts with it and a dash. Defaults to none: a single region, nothing prefixed.
	Code string `env:"TURNSTILE_REGION"`
	// MapFile is the path of the region map (JSON, pkg/region), read by the regions and the
	// router alike. Defaults to none.
	MapFile string `env:"TURNSTILE_REGIONS_FILE"`
	// Map is the region map inline, instead of TURNSTILE_REGIONS_FILE; setting both is an error.
	// Defaults to none.
	Map string `env:"TURNSTILE_REGIONS"`
}

// RegionMap loads the region map; nil without one.
func (s RegionSettings) RegionMap() (*region.Map, error) {
	m, err := region.Load(s.MapFile, s.Map)
	if err != nil {
		return nil, fmt.Errorf("TURNSTILE_REGIONS_FILE/TURNSTILE_REGIONS: %w", err)
	}
	return m, nil
}

// Local is what this region knows of regions, for the misdirected-ID checks (region.Local).
func (s RegionSettings) Local() (region.Local, error) {
	m, err := s.RegionMap()
	if err != nil {
		return region.Local{}, err
	}
	return region.Local{Code: s.Code, Map: m}, nil
}

func (s RegionSettings) validate() []error {
	var errs []error
	if s.Code != "" && !region.ValidCode(s.Code) {
		errs = append(errs, fmt.Errorf("TURNSTILE_REGION: %w", region.ErrInvalidCode))
	}
	m, err := s.RegionMap()
	if err != nil {
		errs = append(errs, err)
	}
	if m != nil && s.Code != "" {
		if _, ok := m.Region(s.Code); !ok {
			errs = append(errs, fmt.Errorf("TURNSTILE_REGION: %q is not a region of the region map", s.Code))
		}
	}
	return errs
}
