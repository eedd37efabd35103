package rpc

import (
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/turnstile-run/turnstile/pkg/apikey"
	"github.com/turnstile-run/turnstile/pkg/frontdoor"
	"github.com/turnstile-run/turnstile/pkg/httpx"
)

// Defaults of the key check.
const (
	// keyCheckTTL is how long a key intake accepted is taken without asking again. It only spares
	// the check's round trip: every native call the request then makes is authenticated by intake
	// again, so a revoked key reads or changes nothing once intake's own cache forgot it.
	keyCheckTTL = 5 * time.Second
	// keyCheckEntries bounds the accepted keys remembered; the map is emptied when full.
	keyCheckEntries = 10000
)

// Authenticator says whom a credential names: frontdoor.Client.Whoami, which asks intake (its key
// cache, miss budgets and Postgres-outage rules). An error is the *frontdoor.Problem intake
// answered: 401, or 429/503 for a key that cannot be checked now.
type Authenticator interface {
	Whoami(ctx context.Context, cred frontdoor.Credential) (string, error)
}

// keyCheck authenticates a request before anything of it is read, so a request without a key
// intake accepts is answered 401 whatever it says: no parse error, no "task not found", no region,
// nothing that depends on the body. A missing or ill-formed key is refused without a round trip.
type keyCheck struct {
	who Authenticator
	now func() time.Time

	mu sync.Mutex
	ok map[[32]byte]time.Time // accepted credential's hash → until when
}

func newKeyCheck(who Authenticator) *keyCheck {
	return &keyCheck{who: who, now: time.Now, ok: map[[32]byte]time.Time{}}
}

// refusal is a request the key check turned away: its HTTP status, challenge and Retry-After.
type refusal struct {
	status    int
	challenge string
	retry     time.Duration
	outcome   string
	detail    string
}

// setHeaders sets a refusal's headers, whichever binding answers it: the challenge of a 401, the
// Retry-After (in whole seconds, at least 1) of a 429/503.
func (no *refusal) setHeaders(w http.ResponseWriter) {
	if no.challenge != "" {
		w.Header().Set("WWW-Authenticate", no.challenge)
	}
	if no.retry > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int((no.retry+time.Second-1)/time.Second))))
	}
}

// check authenticates r's credential; nil means go on.
func (k *keyCheck) check(r *http.Request) *refusal {
	key := httpx.BearerToken(r)
	if key == "" {
		return &refusal{
			status: http.StatusUnauthorized, challenge: httpx.BearerChallenge, outcome: "unauthenticated",
			detail: "an API key is required: Authorization: Bearer <key>",
		}
	}
	bad := &refusal{
		status: http.StatusUnauthorized, challenge: httpx.InvalidTokenChallenge, outcome: "unauthenticated",
		detail: "the API key is unknown or revoked",
	}
	if !apikey.WellFormed(key) {
		return bad
	}
	cred := frontdoor.Credential("Bearer " + key)
	h := sha256.Sum256([]byte(cred))
	now := k.now()
	k.mu.Lock()
	until, hit := k.ok[h]
	k.mu.Unlock()
	if hit && now.Before(until) {
		return nil
	}
	_, err := k.who.Whoami(r.Context(), cred)
	var p *frontdoor.Problem
	switch {
	case err == nil:
		k.mu.Lock()
		if len(k.ok) >= keyCheckEntries {
			clear(k.ok)
		}
		k.ok[h] = now.Add(keyCheckTTL)
		k.mu.Unlock()
		return nil
	case errors.As(err, &p) && p.Status == http.StatusUnauthorized:
		if p.Challenge != "" {
			bad.challenge = p.Challenge
		}
		return bad
	case errors.As(err, &p) && (p.Status == http.StatusTooManyRequests || p.Status >= 500):
		return &refusal{
			status: refusalStatus(p.Status), retry: max(p.RetryAfter, time.Second), outcome: "unavailable",
			detail: "the API key cannot be checked right now: " + detail(p),
		}
	case errors.Is(err, context.Canceled):
		return &refusal{status: http.StatusServiceUnavailable, retry: time.Second, outcome: "unavailable", detail: "the request ended"}
	}
	return &refusal{
		status: http.StatusServiceUnavailable, retry: time.Second, outcome: "unavailable",
		detail: "the API key cannot be checked right now",
	}
}

// refusalStatus keeps a 429 and makes any other failure a 503: the front door is fine, what it
// needs is not, for now.
func refusalStatus(status int) int {
	if status == http.StatusTooManyRequests {
		return status
	}
	return http.StatusServiceUnavailable
}

func detail(p *frontdoor.Problem) string {
	if p.Detail != "" {
		return p.Detail
	}
	return http.StatusText(p.Status)
}
