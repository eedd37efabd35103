package api

import (
	"net/http"
	"time"

	"github.com/turnstile-run/turnstile/pkg/httpx"
)

// minRetryAfter is the shortest Retry-After of a 429: the header counts whole seconds.
const minRetryAfter = time.Second

// refuse answers a refused request with p (a type of httpx's catalog, which fixes the status) and
// counts it under route. Every refusal goes through here, so each carries the Retry-After its
// status calls for: a 503 the jittered Config.RetryAfter, so refused clients do not return in
// lockstep; a 429 p.RetryAfter, at least minRetryAfter.
func (h *Handler) refuse(w http.ResponseWriter, route string, p httpx.Problem) {
	h.requests.WithLabelValues(route, p.Type).Inc()
	switch p.Status {
	case http.StatusServiceUnavailable:
		p.RetryAfter = httpx.Jitter(h.cfg.RetryAfter)
	case http.StatusTooManyRequests:
		p.RetryAfter = max(p.RetryAfter, minRetryAfter)
	}
	httpx.WriteProblem(w, p)
}
