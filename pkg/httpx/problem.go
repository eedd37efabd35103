package httpx

import (
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ProblemTypeBase prefixes every problem type URI. The URIs are stable identifiers that clients
// branch on; they need not resolve.
const ProblemTypeBase = "https://turnstile.dev/problems/"

// Problem is an RFC 9457 problem document.
type Problem struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Detail   string `json:"detail,omitempty"`
	Instance string `json:"instance,omitempty"`
	// RetryAfter, when positive, is also sent as the Retry-After header.
	RetryAfter time.Duration `json:"-"`
	// Extra members (e.g. "errors", "turn_id").
	Extra map[string]any `json:"-"`
}

// The WWW-Authenticate challenges of a 401 (RFC 6750): API keys and stream tokens are presented
// as "Authorization: Bearer <credential>". BearerChallenge answers a request that presented none,
// InvalidTokenChallenge one whose credential was refused.
const (
	BearerChallenge       = `Bearer realm="turnstile"`                        //nolint:gosec // G101: a challenge naming a scheme, no credential
	InvalidTokenChallenge = `Bearer realm="turnstile", error="invalid_token"` //nolint:gosec // G101: a challenge naming a scheme, no credential
)

// WriteProblem writes p as application/problem+json. A 401 carries a WWW-Authenticate challenge:
// the one the caller set, or BearerChallenge.
func WriteProblem(w http.ResponseWriter, p Problem) {
	if p.Type == "" {
		p.Type = "about:blank"
	} else if !strings.HasPrefix(p.Type, "about:") && !strings.Contains(p.Type, "://") {
		p.Type = ProblemTypeBase + p.Type
	}
	if p.Title == "" {
		p.Title = http.StatusText(p.Status)
	}
	body := map[string]any{"type": p.Type, "title": p.Title, "status": p.Status}
	if p.Detail != "" {
		body["detail"] = p.Detail
	}
	if p.Instance != "" {
		body["instance"] = p.Instance
	}
	for k, v := range p.Extra {
		body[k] = v
	}
	if p.RetryAfter > 0 {
		secs := int((p.RetryAfter + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
	}
	Challenge(w, p.Status)
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(body)
}

// Challenge adds BearerChallenge to a 401 answer that has no WWW-Authenticate challenge yet. Every
// 401 of every role is written through it (WriteProblem, and the front doors' own 401s), so none
// goes out without one.
func Challenge(w http.ResponseWriter, status int) {
	if status == http.StatusUnauthorized && w.Header().Get("WWW-Authenticate") == "" {
		w.Header().Set("WWW-Authenticate", BearerChallenge)
	}
}

// Jitter returns d spread uniformly over [d/2, 3d/2), so clients told to retry do not return in
// lockstep.
func Jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return d/2 + rand.N(d) //nolint:gosec // jitter needs no cryptographic randomness
}

// WriteJSON writes v as application/json with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
