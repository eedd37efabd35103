package rpc

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/stretchr/testify/require"
)

// TestCardTrustsOnlyTrustedProxies: the card's URL follows X-Forwarded-Host and -Proto from a
// trusted proxy (a region's router or ingress), and ignores them from a client that reached the
// replica directly, which could otherwise have a shared cache keep a card naming its own host.
func TestCardTrustsOnlyTrustedProxies(t *testing.T) {
	t.Parallel()
	h := NewCardHandler(&a2a.AgentCard{Name: "t"}, Path, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")})
	urlOf := func(remote string) string {
		r := httptest.NewRequest(http.MethodGet, "/.well-known/agent-card.json", nil)
		r.Host = "euw1.example.com"
		r.RemoteAddr = remote
		r.Header.Set("X-Forwarded-Host", "evil.example.net")
		r.Header.Set("X-Forwarded-Proto", "https")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		require.Equal(t, http.StatusOK, w.Code)
		var card a2a.AgentCard
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &card))
		return card.URL
	}
	require.Equal(t, "http://euw1.example.com"+Path, urlOf("203.0.113.7:40000"), "a direct client's forwarding headers are ignored")
	require.Equal(t, "https://evil.example.net"+Path, urlOf("10.1.2.3:40000"), "a trusted proxy's are followed")
	require.Equal(t, "https://evil.example.net"+Path, urlOf("[::ffff:10.1.2.3]:40000"), "a mapped address is its IPv4 one")
	require.Equal(t, "http://euw1.example.com"+Path, urlOf("not-an-address"))
}
