package sse_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/admission"
	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/streamtoken"
	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/pkg/wire"
	"github.com/turnstile-run/turnstile/services/gateway/internal/sse"
)

// openWith opens a stream with a token and extra headers; it is closed at cleanup.
func openWith(t *testing.T, url, token string, hdr map[string]string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// TestSharedBudget: a gateway of a process's shared budget counts its streams with the other front
// doors'. A stream a front door opens with its slot's ticket rides on that slot (one client's
// stream counted once); a made-up ticket, or one of another session, counts as the gateway's own.
func TestSharedBudget(t *testing.T) {
	t.Parallel()
	f := setup(t, 0)
	signer := streamtoken.New(streamtoken.Options{Keys: []config.SigningKey{{ID: "k1", Secret: []byte("0123456789abcdef0123456789abcdef")}}, TTL: time.Hour})
	budget := admission.New(admission.Config{MaxStreams: 3, MaxPerSession: 3, TenantShare: 100})
	gw := f.replica(sse.Config{Tokens: signer, Admission: budget})
	a, b := newSession(), newSession()
	tokenA, tokenB := signer.Sign("acme", a), signer.Sign("acme", b)

	// A front door's stream of session a holds one slot; its backing gateway stream rides on it.
	slot, refusal := budget.Admit(admission.DoorAISDK, wire.NewSessionKey("acme", a), "acme")
	require.Empty(t, refusal)
	defer slot.Release()
	openWith(t, gw.url(a), tokenA, map[string]string{admission.TicketHeader: slot.Ticket()})
	testenv.WaitFor(t, wait, "the backing stream", func() bool { return gw.handler.Connections() == 1 })
	require.Equal(t, 1, budget.Open(), "the backing stream is not counted again")

	// The ticket does not carry another session's stream, and a made-up one nothing.
	openWith(t, gw.url(b), tokenB, map[string]string{admission.TicketHeader: slot.Ticket()})
	openWith(t, gw.url(b), tokenB, map[string]string{admission.TicketHeader: "00112233445566778899aabbccddeeff"})
	testenv.WaitFor(t, wait, "three streams", func() bool { return gw.handler.Connections() == 3 })
	require.Equal(t, 3, budget.Open())
	body := readRefusal(t, gw.url(b)+"?access_token="+tokenB)
	require.Contains(t, body, "over capacity", "the shared cap is full")
	require.Equal(t, 1.0, gw.counter(t, "turnstile_gateway_streams_closed_total", "over_capacity"))
}
