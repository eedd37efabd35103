package frontdoor

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/admission"
	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/streamtoken"
)

// TestOpenStreamAdmission: with a budget, every stream OpenStream opens holds a slot until Close,
// whichever tenant the stream token names; one beyond the cap or the tenant's share is refused
// before the gateway is called, as a 503 or 429 problem with Retry-After; the gateway request
// carries the slot's ticket.
func TestOpenStreamAdmission(t *testing.T) {
	t.Parallel()
	tickets := make(chan string, 8)
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tickets <- r.Header.Get(admission.TicketHeader)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer gw.Close()
	budget := admission.New(admission.Config{MaxStreams: 3, MaxPerSession: 3, TenantShare: 67}) // two a tenant
	c := New(Config{GatewayURL: gw.URL, Admission: budget, Door: admission.DoorA2A, Tenants: true})
	defer c.CloseIdleConnections()
	signer := streamtoken.New(streamtoken.Options{Keys: []config.SigningKey{{ID: "k", Secret: []byte("0123456789abcdef0123456789abcdef")}}})
	open := func(tenant, session string) (*Stream, error) {
		return c.OpenStream(context.Background(), StreamRequest{SessionID: session, Token: signer.Sign(tenant, session)})
	}

	a1, err := open("acme", "s1")
	require.NoError(t, err)
	require.Len(t, <-tickets, 32, "the gateway request carries the slot's ticket")
	a2, err := open("acme", "s2")
	require.NoError(t, err)
	<-tickets
	_, err = open("acme", "s3")
	var p *Problem
	require.True(t, errors.As(err, &p), "%v", err)
	require.Equal(t, http.StatusTooManyRequests, p.Status)
	require.Equal(t, "tenant-stream-share", p.Type)
	require.Positive(t, p.RetryAfter)

	g1, err := open("globex", "s1")
	require.NoError(t, err)
	<-tickets
	_, err = open("globex", "s4")
	require.True(t, errors.As(err, &p), "%v", err)
	require.Equal(t, http.StatusServiceUnavailable, p.Status)
	require.Equal(t, "over-capacity", p.Type)
	require.Equal(t, 3, budget.Open(), "refused streams hold nothing")

	require.NoError(t, a1.Close())
	require.NoError(t, a1.Close())
	require.Equal(t, 2, budget.Open(), "Close gives the slot back, once")
	a3, err := open("acme", "s3")
	require.NoError(t, err)
	<-tickets
	for _, s := range []*Stream{a2, g1, a3} {
		require.NoError(t, s.Close())
	}
	require.Zero(t, budget.Open())
}

// TestOpenStreamRefusedByGateway: a stream the gateway does not open (here a 401) gives its slot
// back at once.
func TestOpenStreamRefusedByGateway(t *testing.T) {
	t.Parallel()
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer gw.Close()
	budget := admission.New(admission.Config{MaxStreams: 1, MaxPerSession: 1, TenantShare: 100})
	c := New(Config{GatewayURL: gw.URL, Admission: budget, Door: admission.DoorAISDK})
	defer c.CloseIdleConnections()
	_, err := c.OpenStream(context.Background(), StreamRequest{SessionID: "s"})
	require.Error(t, err)
	require.Zero(t, budget.Open())
}
