package httpx

import (
	"net/http"
	"time"
)

// NewServer returns an http.Server with limits against slow or oversized clients. WriteTimeout is
// left at zero because SSE responses are long-lived; handlers that are not streams bound their own
// work with contexts, and the read limits stop slowloris clients.
func NewServer(addr string, h http.Handler) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
}
