package httpx

import (
	"net/http"
	"strconv"
	"time"
)

// Limits of the servers NewServer returns.
const (
	// ReadHeaderTimeout bounds reading a request's header, against slowloris clients.
	ReadHeaderTimeout = 5 * time.Second
	// ReadTimeout bounds reading a whole request.
	ReadTimeout = 30 * time.Second
	// IdleTimeout bounds a keep-alive connection's wait for its next request.
	IdleTimeout = 120 * time.Second
	// MaxHeaderBytes bounds a request's header; a larger one is answered 431 header-too-large.
	MaxHeaderBytes = 64 << 10
	// HardMaxHeaderBytes is where net/http itself stops reading a header. net/http answers a
	// header past its own limit with a plain-text 431 before any handler runs, so the server's
	// limit is set above MaxHeaderBytes and a handler answers headers between the two as
	// problem+json; only one past this hard bound still gets net/http's plain answer.
	HardMaxHeaderBytes = 4 * MaxHeaderBytes
	// MaxConcurrentStreams bounds the HTTP/2 streams one connection carries at once. An L7 proxy in
	// front of a gateway multiplexes many browsers' event streams over a few connections: at 1,000
	// a replica's default cap of 20,000 streams takes 20 of them, while one connection still cannot
	// hold more than a twentieth of the replica (net/http's default is 250).
	MaxConcurrentStreams = 1000
)

// NewServer returns an http.Server with limits against slow or oversized clients. WriteTimeout is
// left at zero because SSE responses are long-lived; handlers that are not streams bound their own
// work with contexts, and the read limits stop slowloris clients.
//
// It serves HTTP/1.1 and, on the same port, HTTP/2 cleartext with prior knowledge (h2c, no
// Upgrade): what a proxy speaking HTTP/2 upstream (Envoy, cloud load balancers) sends, with many
// clients' requests sharing a few connections. Every role shares the server; for all but the
// gateway's streams it changes nothing but the framing.
func NewServer(addr string, h http.Handler) *http.Server {
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	return &http.Server{
		Addr:              addr,
		Handler:           LimitHeader(h, MaxHeaderBytes),
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    HardMaxHeaderBytes,
		Protocols:         &protocols,
		HTTP2:             &http.HTTP2Config{MaxConcurrentStreams: MaxConcurrentStreams},
	}
}

// LimitHeader answers a request whose request line and header fields are over limit bytes with
// 431 header-too-large, as problem+json, and passes the others to h.
func LimitHeader(h http.Handler, limit int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if headerSize(r) > limit {
			w.Header().Set("Connection", "close")
			WriteProblem(w, ProblemHeaderTooLarge.Problem("the request header is over its limit of "+strconv.Itoa(limit)+" bytes"))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// headerSize is the size of the request line and header fields as sent (within a few bytes of
// what net/http counts).
func headerSize(r *http.Request) int {
	n := len(r.Method) + 1 + len(r.RequestURI) + 1 + len(r.Proto) + 2
	if r.Host != "" && r.Header.Get("Host") == "" {
		n += len("Host: ") + len(r.Host) + 2
	}
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + 2 + len(v) + 2
		}
	}
	return n
}
