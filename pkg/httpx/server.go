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
)

// NewServer returns an http.Server with limits against slow or oversized clients. WriteTimeout is
// left at zero because SSE responses are long-lived; handlers that are not streams bound their own
// work with contexts, and the read limits stop slowloris clients.
func NewServer(addr string, h http.Handler) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           LimitHeader(h, MaxHeaderBytes),
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    HardMaxHeaderBytes,
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
