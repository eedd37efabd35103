package rpc

import (
	"encoding/json"
	"net/http"
	"net/netip"
	"strings"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
)

// CardHandler serves the Agent Card: with a configured URL, the SDK's static card handler (GET,
// OPTIONS and CORS for any origin, as the card is public); without one, the same card with the URL
// of the request's own origin, so a replica needs no setting to name itself correctly. The
// origin comes from X-Forwarded-Host and X-Forwarded-Proto only when the request's peer is a
// trusted proxy; otherwise a client reaching the replica directly could have a shared cache keep a
// card that names a host of its choosing.
type CardHandler struct {
	card    a2a.AgentCard
	path    string
	static  http.Handler
	trusted []netip.Prefix
}

// NewCardHandler serves c; rpcPath is the JSON-RPC endpoint's path, appended to the request's
// origin when c.URL is empty; trusted are the networks whose forwarding headers are believed.
func NewCardHandler(c *a2a.AgentCard, rpcPath string, trusted []netip.Prefix) *CardHandler {
	// The static handler also answers OPTIONS and other methods when the URL comes per request.
	return &CardHandler{card: *c, path: rpcPath, static: a2asrv.NewStaticAgentCardHandler(c), trusted: trusted}
}

func (c *CardHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "public, max-age=300")
	if c.card.URL != "" || r.Method != http.MethodGet {
		c.static.ServeHTTP(w, r)
		return
	}
	card := c.card
	card.URL = c.origin(r) + c.path
	b, err := json.Marshal(card)
	if err != nil {
		http.Error(w, "agent card", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Access-Control-Allow-Origin", "*")
	w.Header().Set("Content-Type", "application/json")
	w.Header().Add("Vary", "Host, X-Forwarded-Host, X-Forwarded-Proto")
	_, _ = w.Write(b)
}

// origin is the scheme and host the request came to: as a trusted proxy forwarded them, else as
// the connection shows them.
func (c *CardHandler) origin(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	host := r.Host
	if c.fromTrustedProxy(r) {
		if p := r.Header.Get("X-Forwarded-Proto"); p == "http" || p == "https" {
			scheme = p
		}
		if h := r.Header.Get("X-Forwarded-Host"); h != "" {
			host = strings.TrimSpace(strings.Split(h, ",")[0])
		}
	}
	return scheme + "://" + host
}

func (c *CardHandler) fromTrustedProxy(r *http.Request) bool {
	peer, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip := peer.Addr().Unmap()
	for _, p := range c.trusted {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}
