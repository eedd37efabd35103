package streamtoken

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSigner(t *testing.T) {
	t.Parallel()
	old := Key{ID: "k1", Secret: []byte("0123456789abcdef0123")}
	cur := Key{ID: "k2", Secret: []byte("fedcba9876543210fedc")}

	t.Run("Defaults", func(t *testing.T) {
		t.Parallel()
		s := New(Options{})
		require.Equal(t, TTLDefault, s.ttl)
		require.Equal(t, time.Hour, TTLDefault)
		require.Len(t, s.keys, 1, "a signer without keys makes one")
		require.Len(t, s.keys[0].Secret, 32)
		c, err := s.Verify(s.Sign("acme", "s1"), "s1")
		require.NoError(t, err)
		require.InDelta(t, time.Now().Add(TTLDefault).Unix(), c.Expires, 1, "signed for TTLDefault")
		_, err = New(Options{}).Verify(s.Sign("acme", "s1"), "s1")
		require.ErrorIs(t, err, ErrInvalid, "each signer without keys makes its own")
	})
	t.Run("RoundTrip", func(t *testing.T) {
		t.Parallel()
		s := New(Options{Keys: []Key{cur}, TTL: time.Minute})
		c, err := s.Verify(s.Sign("acme", "s1"), "s1")
		require.NoError(t, err)
		require.Equal(t, Claims{KeyID: "k2", Tenant: "acme", SessionID: "s1", Expires: c.Expires}, c)
	})
	t.Run("ClaimsAreJSON", func(t *testing.T) {
		t.Parallel()
		s := New(Options{Keys: []Key{cur}, TTL: time.Minute})
		for _, tenant := range []string{"acme", `we"ird\ten<ant>&`, "t\x00\n", "ünï"} {
			tok := s.Sign(tenant, "s1")
			payload, _, _ := strings.Cut(tok, ".")
			body, err := base64.RawURLEncoding.DecodeString(payload)
			require.NoError(t, err)
			c, err := s.Verify(tok, "s1")
			require.NoError(t, err)
			want, err := json.Marshal(c)
			require.NoError(t, err)
			require.Equal(t, string(want), string(body), "the same bytes as json.Marshal of the claims")
			require.Equal(t, tenant, c.Tenant)
		}
	})
	t.Run("APIKeyID", func(t *testing.T) {
		t.Parallel()
		s := New(Options{Keys: []Key{cur}, TTL: time.Minute})
		tok := s.SignKey("a1b2c3", "acme", "s1")
		c, err := s.Verify(tok, "s1")
		require.NoError(t, err)
		require.Equal(t, "a1b2c3", c.APIKeyID)
		payload, _, _ := strings.Cut(tok, ".")
		body, err := base64.RawURLEncoding.DecodeString(payload)
		require.NoError(t, err)
		want, err := json.Marshal(c)
		require.NoError(t, err)
		require.Equal(t, string(want), string(body))
	})
	t.Run("Unverified", func(t *testing.T) {
		t.Parallel()
		tok := New(Options{Keys: []Key{cur}, TTL: time.Minute}).SignKey("euw1-a1b2c3d4e5f6", "acme", "s1")
		c, ok := Unverified(tok)
		require.True(t, ok)
		require.Equal(t, "euw1-a1b2c3d4e5f6", c.APIKeyID, "read without the key that signed it")
		require.Equal(t, "acme", c.Tenant)
		for _, bad := range []string{"", "ts_0123456789ab_secret", "e30", "!!.x", "bm90IGpzb24.x"} {
			_, ok := Unverified(bad)
			require.False(t, ok, bad)
		}
	})
	t.Run("Rotation", func(t *testing.T) {
		t.Parallel()
		issuedWithOld := New(Options{Keys: []Key{old}, TTL: time.Minute}).Sign("acme", "s1")
		_, err := New(Options{Keys: []Key{cur, old}, TTL: time.Minute}).Verify(issuedWithOld, "s1")
		require.NoError(t, err, "a token signed by an older configured key verifies")
		_, err = New(Options{Keys: []Key{cur}, TTL: time.Minute}).Verify(issuedWithOld, "s1")
		require.ErrorIs(t, err, ErrInvalid, "a token signed by a removed key does not")
	})
	t.Run("Expired", func(t *testing.T) {
		t.Parallel()
		s := New(Options{Keys: []Key{cur}, TTL: time.Minute})
		tok := s.Sign("acme", "s1")
		s.now = func() time.Time { return time.Now().Add(2 * time.Minute) }
		_, err := s.Verify(tok, "s1")
		require.ErrorIs(t, err, ErrExpired)
	})
	t.Run("OtherSession", func(t *testing.T) {
		t.Parallel()
		s := New(Options{Keys: []Key{cur}, TTL: time.Minute})
		_, err := s.Verify(s.Sign("acme", "s1"), "s2")
		require.ErrorIs(t, err, ErrScope)
	})
	t.Run("Tampered", func(t *testing.T) {
		t.Parallel()
		s := New(Options{Keys: []Key{cur}, TTL: time.Minute})
		tok := s.Sign("acme", "s1")
		for _, bad := range []string{"", "x", tok + "x", "e30." + tok[len(tok)-10:], tok[:5] + "A" + tok[6:]} {
			_, err := s.Verify(bad, "s1")
			require.Error(t, err, bad)
		}
	})
}
