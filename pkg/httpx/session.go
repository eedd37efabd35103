package httpx

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/turnstile-run/turnstile/pkg/wire"
)

// SessionIDParam is the path parameter that names a session in every route that takes one.
const SessionIDParam = "session_id"

// SessionID returns the request's session ID from its path, or the invalid-session-id problem to
// answer when it breaks wire.SessionIDRule. Every route with a {session_id} checks it here, so
// intake and the gateway refuse the same IDs in the same words.
func SessionID(r *http.Request) (string, *Problem) {
	id := chi.URLParam(r, SessionIDParam)
	if !wire.SessionIDValid(id) {
		p := ProblemInvalidSession.Problem("session_id must be " + wire.SessionIDRule)
		return id, &p
	}
	return id, nil
}
