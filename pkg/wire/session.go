package wire

import (
	"strings"

	"github.com/google/uuid"
)

// DefaultTenant is the tenant of every request when authentication is off, and of an envelope
// that names none.
const DefaultTenant = "default"

// SessionKeySeparator joins a tenant and a session ID into a session key. Neither can contain it:
// tenants are [A-Za-z0-9._-] (pkg/apikey) and session IDs [A-Za-z0-9._:-].
const SessionKeySeparator = "/"

// SessionKey names a tenant's session everywhere turnstile stores or routes it: the Kafka record
// key, the Redis keys and the Postgres rows. The client's session ID alone names nothing, so a
// session ID another tenant sends reaches only that tenant's own session of the same name, and
// keeping tenants apart needs no lookup of who owns a session. An empty tenant is DefaultTenant.
func SessionKey(tenant, sessionID string) string {
	if tenant == "" {
		tenant = DefaultTenant
	}
	return tenant + SessionKeySeparator + sessionID
}

// SessionKey is the envelope's session key: its tenant's session.
func (e *Envelope) SessionKey() string { return SessionKey(e.Tenant, e.SessionID) }

// ClientSessionID returns the client's session ID of a session key: what the API and the events
// show. A value without a separator is returned as it is.
func ClientSessionID(key string) string {
	if i := strings.Index(key, SessionKeySeparator); i >= 0 {
		return key[i+len(SessionKeySeparator):]
	}
	return key
}

// clientTurnNamespace derives stored turn IDs from client-minted ones (UUIDv5).
var clientTurnNamespace = uuid.MustParse("2d7c0b8e-5f1a-5c3e-9a64-0e8f4b7d1c25")

// ClientTurnKey is the ID a turn whose ID the client minted is stored under: a UUIDv5 of the tenant
// and the client's ID, so the same ID minted by another tenant names another turn. Every store and
// every statement uses this ID; the API and the events show the client's.
func ClientTurnKey(tenant string, clientTurnID uuid.UUID) uuid.UUID {
	if tenant == "" {
		tenant = DefaultTenant
	}
	return uuid.NewSHA1(clientTurnNamespace, append([]byte(tenant+SessionKeySeparator), clientTurnID[:]...))
}

// ShownTurnID is the turn's ID as its client knows it: the ID it minted, or TurnID, prefixed by
// the region that accepted it as "<region>-<uuid>" (no prefix in single-region mode). It is
// region.Prefix, spelt here because pkg/region depends on this package (through httpx);
// region's TestShownTurnIDIsPrefix keeps the two equal.
func (e *Envelope) ShownTurnID() string {
	id := e.TurnID
	if e.ClientTurnID != uuid.Nil {
		id = e.ClientTurnID
	}
	if e.Region == "" {
		return id.String()
	}
	return e.Region + "-" + id.String()
}
