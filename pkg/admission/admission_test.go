package admission_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/admission"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

// key is the key of a session named "tenant/id", or of the default tenant's id.
func key(s string) wire.SessionKey {
	if tenant, id, ok := strings.Cut(s, "/"); ok {
		return wire.NewSessionKey(tenant, id)
	}
	return wire.NewSessionKey("", s)
}

func admit(t *testing.T, b *admission.Budget, door string, session wire.SessionKey, tenant string) *admission.Slot {
	t.Helper()
	s, r := b.Admit(door, session, tenant)
	require.Empty(t, r)
	require.NotNil(t, s)
	return s
}

func TestBudget(t *testing.T) {
	t.Parallel()
	t.Run("ProcessAndSession", func(t *testing.T) {
		t.Parallel()
		b := admission.New(admission.Config{MaxStreams: 3, MaxPerSession: 2, TenantShare: 100})
		a1 := admit(t, b, admission.DoorGateway, key("a"), "")
		admit(t, b, admission.DoorAISDK, key("a"), "")
		_, r := b.Admit(admission.DoorA2A, key("a"), "")
		require.Equal(t, admission.OverCapacity, r, "the session's cap, whatever the door")
		admit(t, b, admission.DoorLangGraph, key("b"), "")
		_, r = b.Admit(admission.DoorGateway, key("c"), "")
		require.Equal(t, admission.OverCapacity, r, "the process's cap")
		a1.Release()
		a1.Release() // a second release gives back nothing more
		require.Equal(t, 2, b.Open())
		admit(t, b, admission.DoorGateway, key("c"), "")
		_, r = b.Admit(admission.DoorGateway, key("d"), "")
		require.Equal(t, admission.OverCapacity, r, "one release, one slot")
	})
	t.Run("TenantShareAcrossDoors", func(t *testing.T) {
		t.Parallel()
		b := admission.New(admission.Config{MaxStreams: 10, MaxPerSession: 10, TenantShare: 30}) // three streams a tenant
		first := admit(t, b, admission.DoorAISDK, key("t1/a"), "t1")
		admit(t, b, admission.DoorA2A, key("t1/b"), "t1")
		admit(t, b, admission.DoorGateway, key("t1/c"), "t1")
		_, r := b.Admit(admission.DoorLangGraph, key("t1/d"), "t1")
		require.Equal(t, admission.OverTenantShare, r)
		admit(t, b, admission.DoorLangGraph, key("t2/a"), "t2")
		admit(t, b, admission.DoorGateway, key("x"), "")
		first.Release()
		admit(t, b, admission.DoorLangGraph, key("t1/d"), "t1")
	})
	t.Run("ShareAtLeastOne", func(t *testing.T) {
		t.Parallel()
		b := admission.New(admission.Config{MaxStreams: 3, MaxPerSession: 3, TenantShare: 1})
		admit(t, b, admission.DoorGateway, key("a"), "t")
		_, r := b.Admit(admission.DoorGateway, key("b"), "t")
		require.Equal(t, admission.OverTenantShare, r)
	})
	t.Run("Tickets", func(t *testing.T) {
		t.Parallel()
		b := admission.New(admission.Config{MaxStreams: 1, MaxPerSession: 1, TenantShare: 100})
		s := admit(t, b, admission.DoorAISDK, key("t/a"), "t")
		tk := s.Ticket()
		require.Len(t, tk, 32)
		require.Equal(t, tk, s.Ticket(), "one ticket a slot")
		require.True(t, b.Backs(tk, key("t/a")), "the backing stream rides on the slot")
		require.False(t, b.Backs(tk, key("t/b")), "not for another session")
		require.False(t, b.Backs("", key("t/a")))
		other := "0"
		if tk[31] == '0' {
			other = "1"
		}
		require.False(t, b.Backs(tk[:31]+other, key("t/a")), "a ticket one digit off")
		require.False(t, admission.New(admission.Config{MaxStreams: 1}).Backs(tk, key("t/a")), "another budget knows no ticket of this one")
		s.Release()
		require.False(t, b.Backs(tk, key("t/a")), "a released slot backs nothing")
	})
	t.Run("Metrics", func(t *testing.T) {
		t.Parallel()
		b := admission.New(admission.Config{MaxStreams: 2, MaxPerSession: 2, TenantShare: 50})
		reg := prometheus.NewRegistry()
		b.Register(reg)
		s := admit(t, b, admission.DoorA2A, key("t/a"), "t")
		_, r := b.Admit(admission.DoorAISDK, key("t/b"), "t")
		require.Equal(t, admission.OverTenantShare, r)
		admit(t, b, admission.DoorAISDK, key("u/a"), "u")
		_, r = b.Admit(admission.DoorGateway, key("v/a"), "v")
		require.Equal(t, admission.OverCapacity, r)
		s.Release()
		require.Equal(t, 1.0, testutil.ToFloat64(b.Metrics().Admitted.WithLabelValues(admission.DoorA2A)))
		require.Equal(t, 1.0, testutil.ToFloat64(b.Metrics().Refused.WithLabelValues(admission.DoorAISDK, "over_tenant_share")))
		require.Equal(t, 1.0, testutil.ToFloat64(b.Metrics().Refused.WithLabelValues(admission.DoorGateway, "over_capacity")))
		require.Equal(t, 0.0, testutil.ToFloat64(b.Metrics().Open.WithLabelValues(admission.DoorA2A)))
		require.Equal(t, 1.0, testutil.ToFloat64(b.Metrics().Open.WithLabelValues(admission.DoorAISDK)))
	})
}

func TestRefusalProblem(t *testing.T) {
	t.Parallel()
	p := admission.OverCapacity.Problem(4 * time.Second)
	require.Equal(t, http.StatusServiceUnavailable, p.Status)
	require.Equal(t, "over-capacity", p.Type)
	require.InDelta(t, 4*time.Second, p.RetryAfter, float64(2*time.Second), "jittered around the base")
	p = admission.OverTenantShare.Problem(4 * time.Second)
	require.Equal(t, http.StatusTooManyRequests, p.Status)
	require.Equal(t, "tenant-stream-share", p.Type)
	require.Positive(t, p.RetryAfter)
	require.Equal(t, http.StatusTooManyRequests, admission.OverTenantShare.Status())
}
