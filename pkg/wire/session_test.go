package wire

import (
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var (
	_ driver.Valuer = SessionKey{}
	_ sql.Scanner   = (*SessionKey)(nil)
)

func TestSessionKey(t *testing.T) {
	t.Parallel()
	t.Run("TenantAndID", func(t *testing.T) {
		t.Parallel()
		k := NewSessionKey("acme", "s1")
		require.Equal(t, "acme/s1", k.String())
		require.Equal(t, "acme", k.Tenant())
		require.Equal(t, "s1", k.SessionID())
		require.False(t, k.IsZero())
		require.NotEqual(t, NewSessionKey("acme", "s1"), NewSessionKey("globex", "s1"))
		require.Equal(t, NewSessionKey("acme", "s1"), NewSessionKey("acme", "s1"), "comparable: equal keys are ==")
	})
	t.Run("EmptyTenantIsDefault", func(t *testing.T) {
		t.Parallel()
		e := Envelope{SessionID: "s1"}
		require.Equal(t, NewSessionKey(DefaultTenant, "s1"), e.SessionKey())
		require.Equal(t, NewSessionKey(DefaultTenant, "s1"), NewSessionKey("", "s1"))
		require.Equal(t, DefaultTenant+"/s1", e.SessionKey().String())
	})
	t.Run("SessionIDsWithColons", func(t *testing.T) {
		t.Parallel()
		k := NewSessionKey("t.x-y", "a:b.c-d")
		require.Equal(t, "a:b.c-d", k.SessionID())
		require.Equal(t, "t.x-y", k.Tenant())
	})
	t.Run("Zero", func(t *testing.T) {
		t.Parallel()
		var k SessionKey
		require.True(t, k.IsZero())
		require.Empty(t, k.String())
		require.Empty(t, k.Tenant())
		require.Empty(t, k.SessionID())
	})
}

func TestParseSessionKey(t *testing.T) {
	t.Parallel()
	t.Run("RoundTrip", func(t *testing.T) {
		t.Parallel()
		for _, c := range []struct{ tenant, id string }{
			{"acme", "s1"},
			{DefaultTenant, "a:b.c-d_e"},
			{"t.x-y_z", "x"},
			{strings.Repeat("t", TenantMaxLen), strings.Repeat("s", SessionIDMaxLen)},
		} {
			k := NewSessionKey(c.tenant, c.id)
			p, err := ParseSessionKey(k.String())
			require.NoError(t, err, k.String())
			require.Equal(t, k, p)
			require.Equal(t, c.tenant, p.Tenant())
			require.Equal(t, c.id, p.SessionID())
		}
	})
	t.Run("BadInput", func(t *testing.T) {
		t.Parallel()
		for _, bad := range []string{
			"",            // empty
			"s1",          // no separator: a bare session ID is not a key
			"acme:s1",     // another separator
			"/s1",         // empty tenant
			"acme/",       // empty session ID
			"/",           // both empty
			"acme/s1/x",   // a second separator in the ID
			"ac me/s1",    // a space in the tenant
			"acme:x/s1",   // ':' is a session ID's character, not a tenant's
			"acme/s 1",    // a space in the ID
			"acme/{s1}",   // braces would break the Redis hash tag
			"acme/ü",      // not ASCII
			"acme/s1\x00", // a NUL
			strings.Repeat("t", TenantMaxLen+1) + "/s1",      // tenant too long
			"acme/" + strings.Repeat("s", SessionIDMaxLen+1), // ID too long
		} {
			k, err := ParseSessionKey(bad)
			require.ErrorIs(t, err, ErrInvalidSessionKey, "%q", bad)
			require.True(t, k.IsZero(), "%q", bad)
		}
	})
	t.Run("JSON", func(t *testing.T) {
		t.Parallel()
		type doc struct {
			Key SessionKey `json:"key"`
		}
		b, err := json.Marshal(doc{Key: NewSessionKey("acme", "s1")})
		require.NoError(t, err)
		require.JSONEq(t, `{"key":"acme/s1"}`, string(b), "a key in JSON is its string form")
		var d doc
		require.NoError(t, json.Unmarshal(b, &d))
		require.Equal(t, NewSessionKey("acme", "s1"), d.Key)
		require.Error(t, json.Unmarshal([]byte(`{"key":"s1"}`), &d), "a bare session ID is not a key")
	})
	t.Run("SQL", func(t *testing.T) {
		t.Parallel()
		v, err := NewSessionKey("acme", "s1").Value()
		require.NoError(t, err)
		require.Equal(t, "acme/s1", v)
		v, err = SessionKey{}.Value()
		require.NoError(t, err)
		require.Nil(t, v, "the zero key is NULL")

		var k SessionKey
		require.NoError(t, k.Scan("acme/s1"))
		require.Equal(t, NewSessionKey("acme", "s1"), k)
		require.NoError(t, k.Scan([]byte("globex/s2")))
		require.Equal(t, NewSessionKey("globex", "s2"), k)
		require.NoError(t, k.Scan(nil))
		require.True(t, k.IsZero())
		require.NoError(t, k.Scan("acme/a b/c"), "a stored value is read as it was written")
		require.Equal(t, "acme/a b/c", k.String())
		require.Equal(t, "acme", k.Tenant())
		require.Equal(t, "a b/c", k.SessionID(), "split at the first separator")
		require.NoError(t, k.Scan("s1"))
		require.Equal(t, "s1", k.String(), "a value without a separator is kept whole")
		require.Equal(t, "s1", k.SessionID(), "and is its own session ID")
		require.Empty(t, k.Tenant())
		require.Error(t, k.Scan(42))
	})
}

// FuzzParseSessionKey checks that whatever ParseSessionKey accepts is its own String form, splits
// at the first separator into a valid tenant and a valid session ID, and is the key NewSessionKey
// builds from its parts; and that whatever it refuses fails one of those rules.
func FuzzParseSessionKey(f *testing.F) {
	for _, s := range []string{"acme/s1", "default/a:b.c-d", "s1", "/s1", "acme/", "a/b/c", "ü/s", "acme/{x}", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseSessionKey(s)
		tenant, id, found := strings.Cut(s, SessionKeySeparator)
		valid := found && TenantValid(tenant) && SessionIDValid(id)
		if !valid {
			require.ErrorIs(t, err, ErrInvalidSessionKey)
			require.True(t, k.IsZero())
			return
		}
		require.NoError(t, err)
		require.Equal(t, s, k.String())
		require.Equal(t, tenant, k.Tenant())
		require.Equal(t, id, k.SessionID())
		require.Equal(t, NewSessionKey(tenant, id), k)
		require.NotContains(t, k.Tenant(), SessionKeySeparator)
		b, err := k.MarshalText()
		require.NoError(t, err)
		var back SessionKey
		require.NoError(t, back.UnmarshalText(b))
		require.Equal(t, k, back)
	})
}
