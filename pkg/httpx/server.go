package httpx

import (
	"net/http"
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
	// MaxHeaderBytes bounds a request's header.
	MaxHeaderBytes = 64 << 10
)

// NewServer returns an http.Server with limits against slow or oversized clients. WriteTimeout is
// left at zero because SSE responses are long-lived; handlers that are not streams bound their own
// work with contexts, and the read limits stop slowloris clients.
func NewServer(addr string, h http.Handler) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
	}
}
