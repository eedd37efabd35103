package wire

import "strings"

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
