package wire

import (
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
)

// DefaultTenant is the tenant of every request when authentication is off, and of an envelope
// that names none. It is the one spelling of the name: pkg/region and intake's API use it.
const DefaultTenant = "default"

// SessionKeySeparator joins a tenant and a session ID into a session key. Neither can contain it:
// tenants are TenantRule and session IDs SessionIDRule.
const SessionKeySeparator = "/"

// TenantRule is the rule a tenant name follows (pkg/apikey's ErrInvalidTenant says the same).
const TenantRule = "1-64 characters of [A-Za-z0-9._-]"

// TenantMaxLen is the longest tenant name TenantRule allows.
const TenantMaxLen = 64

// ErrInvalidSessionKey is returned by ParseSessionKey for a value that is not
// "<tenant>/<session ID>" with the tenant following TenantRule and the ID SessionIDRule.
var ErrInvalidSessionKey = errors.New("invalid session key")

// SessionKey names a tenant's session everywhere turnstile stores or routes it: its String form
// "<tenant>/<session ID>" is the Kafka record key, the hash tag of the session's Redis keys and the
// session_id column of the Postgres rows. The client's session ID alone names nothing, so a session
// ID another tenant sends reaches only that tenant's own session of the same name, and keeping
// tenants apart needs no lookup of who owns a session.
//
// A SessionKey is not a session ID: the API and the events show SessionID, the stores take the
// key, and the two are different types so that one cannot be passed for the other. The zero value
// names no session. SessionKey is comparable, so it can key a map.
//
// It holds its string form and the separator's position, so String, which every store call uses,
// costs nothing; Tenant and SessionID are slices of it.
type SessionKey struct {
	key string // "<tenant>/<session ID>"; empty for the zero value
	sep int    // index of the separator in key; -1 for a stored value without one (Scan)
}

// NewSessionKey returns the key of tenant's session id. An empty tenant is DefaultTenant. It does
// not check either part against its rule: callers pass a tenant from an API key or an envelope and
// an ID the API has validated (httpx.SessionID); ParseSessionKey checks a key read back as text.
func NewSessionKey(tenant, id string) SessionKey {
	if tenant == "" {
		tenant = DefaultTenant
	}
	return SessionKey{key: tenant + SessionKeySeparator + id, sep: len(tenant)}
}

// ParseSessionKey parses the String form of a key: "<tenant>/<session ID>", the tenant following
// TenantRule and the ID SessionIDRule. Anything else is ErrInvalidSessionKey.
func ParseSessionKey(s string) (SessionKey, error) {
	i := strings.Index(s, SessionKeySeparator)
	if i < 0 {
		return SessionKey{}, fmt.Errorf("%w %q: no %q between tenant and session ID", ErrInvalidSessionKey, s, SessionKeySeparator)
	}
	if !TenantValid(s[:i]) {
		return SessionKey{}, fmt.Errorf("%w %q: tenant must be %s", ErrInvalidSessionKey, s, TenantRule)
	}
	if !SessionIDValid(s[i+len(SessionKeySeparator):]) {
		return SessionKey{}, fmt.Errorf("%w %q: session ID must be %s", ErrInvalidSessionKey, s, SessionIDRule)
	}
	return SessionKey{key: s, sep: i}, nil
}

// TenantValid reports whether name follows TenantRule.
func TenantValid(name string) bool {
	if len(name) == 0 || len(name) > TenantMaxLen {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// Tenant is the tenant whose session k names; empty for the zero key and for a stored value
// without a separator.
func (k SessionKey) Tenant() string {
	if k.sep <= 0 {
		return ""
	}
	return k.key[:k.sep]
}

// SessionID is the client's session ID: what the API and the events show. Empty for the zero key;
// the whole value for a stored value without a separator.
func (k SessionKey) SessionID() string {
	if k.sep < 0 {
		return k.key
	}
	if k.key == "" {
		return ""
	}
	return k.key[k.sep+len(SessionKeySeparator):]
}

// String is the key's storage form, "<tenant>/<session ID>"; empty for the zero key.
func (k SessionKey) String() string { return k.key }

// IsZero reports whether k names no session.
func (k SessionKey) IsZero() bool { return k.key == "" }

// MarshalText writes the String form, so a key in JSON is a string.
func (k SessionKey) MarshalText() ([]byte, error) { return []byte(k.key), nil }

// UnmarshalText parses the String form with ParseSessionKey; empty text is the zero key.
func (k *SessionKey) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*k = SessionKey{}
		return nil
	}
	p, err := ParseSessionKey(string(b))
	if err != nil {
		return err
	}
	*k = p
	return nil
}

// Value writes the key to a Postgres text column as its String form (driver.Valuer); the zero key
// is NULL.
func (k SessionKey) Value() (driver.Value, error) {
	if k.key == "" {
		return nil, nil
	}
	return k.key, nil
}

// Scan reads a key from a Postgres text column (sql.Scanner); NULL is the zero key. A stored value
// is read as it was written, unchecked, so String gives it back whole: it splits at its first
// separator, and a value without one (none is written since migration 00090) has no tenant and is
// its own session ID, as the SQL function turnstile_session_id (migration 00190) reads it.
func (k *SessionKey) Scan(src any) error {
	var s string
	switch v := src.(type) {
	case nil:
		*k = SessionKey{}
		return nil
	case string:
		s = v
	case []byte:
		s = string(v)
	default:
		return fmt.Errorf("scan session key: %T is not text", src)
	}
	*k = storedSessionKey(s)
	return nil
}

// storedSessionKey is the key a stored value s names, as Scan reads it.
func storedSessionKey(s string) SessionKey {
	if s == "" {
		return SessionKey{}
	}
	return SessionKey{key: s, sep: strings.Index(s, SessionKeySeparator)}
}

// SessionKey is the envelope's session key: its tenant's session.
func (e *Envelope) SessionKey() SessionKey { return NewSessionKey(e.Tenant, e.SessionID) }

// FenceToken is a turn's fencing token: the lease's number in Postgres, taken at the claim and
// raised by every claim after it, and the fence a session's Redis stream keeps per turn. A write
// carrying a token below the fence is refused, so an attempt that lost its lease cannot publish
// or complete over the one that took it.
type FenceToken int64

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
