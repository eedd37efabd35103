package httpx

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"time"

	"golang.org/x/net/http2"
)

// MaxStreamsPerConn is how many requests one HTTP/2 connection may carry at once. A proxy in front
// of the gateway (or the load generator) multiplexes its clients' SSE streams over a few
// connections, each stream held for as long as its browser watches, so the limit is well above
// net/http's default of 250; a client with more streams opens another connection.
const MaxStreamsPerConn = 1000

// NewServer returns an http.Server with limits against slow or oversized clients. WriteTimeout is
// left at zero because SSE responses are long-lived; handlers that are not streams bound their own
// work with contexts, and the read limits stop slowloris clients.
//
// It speaks HTTP/1.1 and HTTP/2 without TLS (h2c, prior knowledge only: a client that opens with
// HTTP/2's preface, no Upgrade dance). TLS ends at the proxy in front of the services; from there
// a proxy that speaks HTTP/2 to its upstreams carries many streams on one connection, where
// HTTP/1.1 takes a connection, and a file descriptor at each end, per SSE stream. The read limits
// hold for HTTP/2 too: ReadTimeout bounds a request's body, not a stream's life.
func NewServer(addr string, h http.Handler) *http.Server {
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		Protocols:         &protocols,
		HTTP2:             &http.HTTP2Config{MaxConcurrentStreams: MaxStreamsPerConn},
	}
}

// H2CTransport returns a transport that speaks HTTP/2 without TLS to every server (prior
// knowledge, as NewServer's servers accept it): concurrent requests share a connection, and when
// every connection carries as many as the server allows, one more is dialled, not one per waiting
// request (golang.org/x/net/http2's pool; net/http's own h2c client dials per request until a
// connection is up, about 200 connections for 1,200 streams opened at once). Only for servers known
// to speak h2c: an HTTP/1.1-only server refuses its requests. CloseIdleConnections releases it.
func H2CTransport() *http2.Transport {
	return &http2.Transport{
		AllowHTTP: true,
		DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}
}
