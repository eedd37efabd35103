package region

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"strings"
)

// Policy is what a tenant's new work does while its home region is down.
type Policy string

// The policies.
const (
	// PolicyWait (the default): the tenant's work waits for its home region, answered 503 meanwhile.
	PolicyWait Policy = "wait"
	// PolicyFailover: new work (no ID yet) goes to the next healthy region; work carrying an ID
	// keeps answering 503 naming its owner.
	PolicyFailover Policy = "failover"
)

// Region is one region of the map: its code and the base URL of its public endpoint.
type Region struct {
	Code string `json:"code"`
	URL  string `json:"url"`
}

// Tenant is a tenant's placement: its home region, its policy and the IDs of its API keys.
type Tenant struct {
	Name string `json:"name"`
	// Home is the region owning the tenant's un-prefixed IDs and new work. Defaults to the map's
	// default_home.
	Home string `json:"home,omitempty"`
	// Policy defaults to PolicyWait.
	Policy Policy   `json:"policy,omitempty"`
	KeyIDs []string `json:"key_ids,omitempty"`
}

// Map is the region map: the regions in failover order, the home of tenants the map does not
// list, and the tenants it does. Build one with Parse or Load; a Map is read-only afterwards and
// safe for concurrent use.
type Map struct {
	Regions []Region `json:"regions"`
	// DefaultHome is the home of requests no tenant entry claims. Defaults to the first region.
	DefaultHome string   `json:"default_home,omitempty"`
	Tenants     []Tenant `json:"tenants,omitempty"`

	index   map[string]int    // region code → position in Regions
	byKeyID map[string]Tenant // key ID → its tenant
	byName  map[string]Tenant
}

// ErrBothSources is TURNSTILE_REGIONS_FILE and TURNSTILE_REGIONS set together.
var ErrBothSources = errors.New("set TURNSTILE_REGIONS_FILE or TURNSTILE_REGIONS, not both")

// Load reads the region map from a file (TURNSTILE_REGIONS_FILE) or inline JSON
// (TURNSTILE_REGIONS). Neither set is no map: nil and no error.
func Load(file, inline string) (*Map, error) {
	switch {
	case file != "" && inline != "":
		return nil, ErrBothSources
	case file != "":
		data, err := os.ReadFile(file) //nolint:gosec // the operator names the file
		if err != nil {
			return nil, fmt.Errorf("read region map: %w", err)
		}
		return Parse(data)
	case inline != "":
		return Parse([]byte(inline))
	}
	return nil, nil //nolint:nilnil // no map configured is a valid state, not an error
}

// keyIDRE is the shape of an API key ID: 12 hex digits, prefixed by a region when one minted it.
var keyIDRE = regexp.MustCompile(`^(?:` + CodePattern + `-)?[0-9a-f]{12}$`)

// ValidKeyID reports whether id has the shape of an API key ID.
func ValidKeyID(id string) bool { return keyIDRE.MatchString(id) }

// Parse reads and checks a region map, reporting every problem at once. Unknown members are
// refused, so a misspelt one fails at start instead of being ignored.
func Parse(data []byte) (*Map, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var m Map
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("region map: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("region map: more than one JSON value")
	}
	if err := m.build(); err != nil {
		return nil, err
	}
	return &m, nil
}

// build fills defaults and indexes, and checks every rule.
func (m *Map) build() error {
	var errs []string
	bad := func(format string, a ...any) { errs = append(errs, fmt.Sprintf(format, a...)) }
	m.index = make(map[string]int, len(m.Regions))
	if len(m.Regions) == 0 {
		bad("regions: at least one region is needed")
	}
	for i, r := range m.Regions {
		if !ValidCode(r.Code) {
			bad("regions[%d].code %q: %v", i, r.Code, ErrInvalidCode)
		} else if _, dup := m.index[r.Code]; dup {
			bad("regions[%d].code %q: listed twice", i, r.Code)
		} else {
			m.index[r.Code] = i
		}
		if u, err := url.Parse(r.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("regions[%d].url %q: must be an absolute http(s) URL", i, r.URL)
		}
	}
	if m.DefaultHome == "" && len(m.Regions) > 0 {
		m.DefaultHome = m.Regions[0].Code
	}
	if _, ok := m.index[m.DefaultHome]; !ok && len(m.Regions) > 0 {
		bad("default_home %q: not a region of the map", m.DefaultHome)
	}
	m.byKeyID = map[string]Tenant{}
	m.byName = make(map[string]Tenant, len(m.Tenants))
	for i := range m.Tenants {
		t := &m.Tenants[i]
		if t.Name == "" || strings.ContainsAny(t.Name, " /\t\n") {
			bad("tenants[%d].name %q: must be a tenant name", i, t.Name)
		} else if _, dup := m.byName[t.Name]; dup {
			bad("tenants[%d].name %q: listed twice", i, t.Name)
		}
		if t.Home == "" {
			t.Home = m.DefaultHome
		} else if _, ok := m.index[t.Home]; !ok {
			bad("tenants[%d].home %q: not a region of the map", i, t.Home)
		}
		switch t.Policy {
		case "":
			t.Policy = PolicyWait
		case PolicyWait, PolicyFailover:
		default:
			bad("tenants[%d].policy %q: must be wait or failover", i, t.Policy)
		}
		for _, id := range t.KeyIDs {
			if !ValidKeyID(id) {
				bad("tenants[%d].key_ids %q: not an API key ID", i, id)
			} else if other, dup := m.byKeyID[id]; dup {
				bad("tenants[%d].key_ids %q: already listed by tenant %q", i, id, other.Name)
			}
			m.byKeyID[id] = *t
		}
		m.byName[t.Name] = *t
	}
	if len(errs) > 0 {
		return fmt.Errorf("region map: %s", strings.Join(errs, "; "))
	}
	return nil
}

// Region returns the region of code.
func (m *Map) Region(code string) (Region, bool) {
	i, ok := m.index[code]
	if !ok {
		return Region{}, false
	}
	return m.Regions[i], true
}

// Owner applies the owner rule to an ID: the region its prefix names, when that is a region of
// the map. ok is false for an ID with no such prefix, which belongs to its tenant's home region.
func (m *Map) Owner(id string) (code string, ok bool) {
	code, _, ok = Split(id)
	if !ok {
		return "", false
	}
	if _, known := m.index[code]; !known {
		return "", false
	}
	return code, true
}

// Next returns the first region after from in the map's order, wrapping, for which healthy says
// true; from itself is never returned. ok is false when no other region is healthy. from need not
// be in the map (then the search starts at the first region).
func (m *Map) Next(from string, healthy func(code string) bool) (Region, bool) {
	start, ok := m.index[from]
	if !ok {
		start = -1
	}
	n := len(m.Regions)
	for step := 1; step <= n; step++ {
		r := m.Regions[(start+step+n)%n]
		if r.Code != from && healthy(r.Code) {
			return r, true
		}
	}
	return Region{}, false
}
