package sse

import (
	"errors"
	"net/http"

	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/pkg/streamtoken"
)

// authorize checks the stream token when tokens are on and returns its claims (none without
// tokens: the default tenant's session is opened). A valid token for another session is answered
// like an unknown session (404), so one tenant cannot learn that another's session exists; a
// token whose API key was revoked is a 401.
func (h *Handler) authorize(w http.ResponseWriter, o openRequest) (streamtoken.Claims, bool) {
	if h.cfg.Tokens == nil {
		return streamtoken.Claims{}, true
	}
	if o.Token == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="turnstile"`)
		httpx.WriteProblem(w, httpx.ProblemUnauthenticated.Problem("a stream token is required: Authorization: Bearer <stream_token> or ?access_token="))
		return streamtoken.Claims{}, false
	}
	claims, err := h.cfg.Tokens.Verify(o.Token, o.SessionID)
	switch {
	case err == nil && h.cfg.Revocations.Revoked(claims.APIKeyID):
		w.Header().Set("WWW-Authenticate", `Bearer realm="turnstile", error="invalid_token"`)
		httpx.WriteProblem(w, httpx.ProblemUnauthenticated.Problem("the API key this stream token was issued to is revoked"))
	case err == nil:
		return claims, true
	case errors.Is(err, streamtoken.ErrScope):
		httpx.WriteProblem(w, httpx.ProblemSessionNotFound.Problem("no such session"))
	case errors.Is(err, streamtoken.ErrExpired):
		w.Header().Set("WWW-Authenticate", `Bearer realm="turnstile", error="invalid_token"`)
		httpx.WriteProblem(w, httpx.ProblemTokenExpired.Problem("the stream token expired; get a new one from the turn's status"))
	default:
		w.Header().Set("WWW-Authenticate", `Bearer realm="turnstile", error="invalid_token"`)
		httpx.WriteProblem(w, httpx.ProblemUnauthenticated.Problem("the stream token is not valid"))
	}
	return streamtoken.Claims{}, false
}
