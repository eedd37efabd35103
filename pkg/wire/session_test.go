package wire

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSessionKey(t *testing.T) {
	t.Parallel()
	t.Run("TenantAndID", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, "acme/s1", SessionKey("acme", "s1"))
		require.NotEqual(t, SessionKey("acme", "s1"), SessionKey("globex", "s1"))
		require.Equal(t, "s1", ClientSessionID(SessionKey("acme", "s1")))
	})
	t.Run("EmptyTenantIsDefault", func(t *testing.T) {
		t.Parallel()
		e := Envelope{SessionID: "s1"}
		require.Equal(t, SessionKey(DefaultTenant, "s1"), e.SessionKey())
	})
	t.Run("SessionIDsWithColons", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, "a:b.c-d", ClientSessionID(SessionKey("t.x-y", "a:b.c-d")))
		require.Equal(t, "bare", ClientSessionID("bare"), "a value of the unscoped shape is returned as it is")
	})
}
