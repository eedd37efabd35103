package rpc

import (
	"net/http"
	"net/netip"
	"strings"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"

	"github.com/turnstile-run/turnstile/services/a2a/internal/card"
)

// CardHandler serves the Agent Card, in the form protocol 0.3 and 1.0 clients both read
// (card.JSON: 0.3's url and preferredTransport, 1.0's supportedInterfaces naming the JSON-RPC
// endpoint and the HTTP+JSON binding under RESTPath), to GET from any origin, as the card is
// public; OPTIONS and other methods as the SDK's static card handler answers them. With a
// configured URL the card names it; without one, the URL of the request's own origin, so a replica needs no setting to name itself correctly. The
// origin comes from X-Forwarded-Host and X-Forwarded-Proto only when the request's peer is a
// trusted proxy; otherwise a client reaching the replica directly could have a shared cache keep a
// card that names a host of its choosing.
type CardHandler struct {
	card    a2a.AgentCard
	path    string
	rest    string
	static  http.Handler
	trusted []netip.Prefix
	// fixed is the card's JSON when its URL is configured.
	fixed []byte
}

// NewCardHandler serves c; rpcPath is the JSON-RPC endpoint's path, appended to the request's
// origin when c.URL is empty; trusted are the networks whose forwarding headers are believed.
func NewCardHandler(c *a2a.AgentCard, rpcPath string, trusted []netip.Prefix) *CardHandler {
	h := &CardHandler{card: *c, path: rpcPath, rest: rpcPath + "/rest", static: a2asrv.NewStaticAgentCardHandler(c), trusted: trusted}
	if c.URL != "" {
		b, err := card.JSON(c, strings.TrimSuffix(c.URL, rpcPath)+h.rest)
		if err != nil {
			panic("agent card: " + err.Error())
		}
		h.fixed = b
	}
	return h
}

func (c *CardHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "public, max-age=300")
	if r.Method != http.MethodGet {
		c.static.ServeHTTP(w, r)
		return
	}
	b := c.fixed
	if b == nil {
		ac := c.card
		origin := c.origin(r)
		ac.URL = origin + c.path
		var err error
		b, err = card.JSON(&ac, origin+c.rest)
		if err != nil {
			http.Error(w, "agent card", http.StatusInternalServerError)
			return
		}
		w.Header().Add("Vary", "Host, X-Forwarded-Host, X-Forwarded-Proto")
	}
	w.Header().Set("Access-Control-Allow-Origin", "*")
	w.Header().Set("Content-Type", "application/json")
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
