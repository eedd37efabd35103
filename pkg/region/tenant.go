package region

import (
	"strings"

	"github.com/turnstile-run/turnstile/pkg/wire"
)

// apiKeyPrefix starts every turnstile API key: "ts_<key id>_<secret>".
const apiKeyPrefix = "ts_"

// KeyID reads the key ID out of an API key ("ts_<key id>_<secret>"). Key IDs are not secret; the
// key is not checked (the region that serves the request does that).
func KeyID(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, apiKeyPrefix)
	if !ok {
		return "", false
	}
	id, _, ok := strings.Cut(rest, "_")
	if !ok || !ValidKeyID(id) {
		return "", false
	}
	return id, true
}

// Tenant places a request by its API key (empty when the request carries none, as with auth
// off), without a lookup:
//  1. the map's tenant listing the key's ID;
//  2. else, for a key ID with a region prefix, a tenant of unknown name (Name empty) whose home is
//     that region, policy wait — provided the map has that region;
//  3. else the map's tenant named "default", or a "default" tenant at default_home, policy wait.
func (m *Map) Tenant(key string) Tenant {
	id, _ := KeyID(key)
	return m.TenantOfKeyID(id)
}

// TenantOfKeyID is Tenant for a request that names its API key by ID only ("" for none): a
// stream token carries the ID of the key it was issued to.
func (m *Map) TenantOfKeyID(id string) Tenant {
	if ValidKeyID(id) {
		if t, ok := m.byKeyID[id]; ok {
			return t
		}
		if code, ok := m.Owner(id); ok {
			return Tenant{Home: code, Policy: PolicyWait}
		}
	}
	if t, ok := m.byName[wire.DefaultTenant]; ok {
		return t
	}
	return Tenant{Name: wire.DefaultTenant, Home: m.DefaultHome, Policy: PolicyWait}
}
