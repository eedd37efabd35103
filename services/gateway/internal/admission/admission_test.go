package admission_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/wire"
	"github.com/turnstile-run/turnstile/services/gateway/internal/admission"
)

func TestCaps(t *testing.T) {
	t.Parallel()
	t.Run("ReplicaAndSession", func(t *testing.T) {
		t.Parallel()
		c := admission.New(3, 2, 100)
		require.Empty(t, c.Admit(wire.NewSessionKey("", "a"), ""))
		require.Empty(t, c.Admit(wire.NewSessionKey("", "a"), ""))
		require.Equal(t, admission.OverCapacity, c.Admit(wire.NewSessionKey("", "a"), ""), "the session's cap")
		require.Empty(t, c.Admit(wire.NewSessionKey("", "b"), ""))
		require.Equal(t, admission.OverCapacity, c.Admit(wire.NewSessionKey("", "c"), ""), "the replica's cap")
		c.Release(wire.NewSessionKey("", "a"), "")
		require.Empty(t, c.Admit(wire.NewSessionKey("", "c"), ""), "a released slot is taken again")
	})
	t.Run("TenantShare", func(t *testing.T) {
		t.Parallel()
		c := admission.New(10, 10, 20) // two streams a tenant
		require.Empty(t, c.Admit(wire.NewSessionKey("t1", "a"), "t1"))
		require.Empty(t, c.Admit(wire.NewSessionKey("t1", "b"), "t1"))
		require.Equal(t, admission.OverTenantShare, c.Admit(wire.NewSessionKey("t1", "c"), "t1"))
		require.Empty(t, c.Admit(wire.NewSessionKey("t2", "a"), "t2"), "another tenant has its own share")
		require.Empty(t, c.Admit(wire.NewSessionKey("", "x"), ""), "no tenant, no share")
		c.Release(wire.NewSessionKey("t1", "a"), "t1")
		require.Empty(t, c.Admit(wire.NewSessionKey("t1", "c"), "t1"))
	})
	t.Run("ShareAtLeastOne", func(t *testing.T) {
		t.Parallel()
		c := admission.New(3, 3, 1)
		require.Empty(t, c.Admit(wire.NewSessionKey("t", "a"), "t"))
		require.Equal(t, admission.OverTenantShare, c.Admit(wire.NewSessionKey("t", "b"), "t"))
	})
}
