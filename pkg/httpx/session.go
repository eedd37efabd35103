package httpx

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/turnstile-run/turnstile/pkg/wire"
)

// SessionIDParam is the path parameter that names a session in every route that takes one.
const SessionIDParam = "session_id"

// SessionID returns the request's session ID from its path, or the invalid-session-id problem to
// answer when it breaks wire.SessionIDRule or is "." or "..". Every route with a {session_id}
// checks it here, so intake and the gateway refuse the same IDs in the same words.
//
// "." and ".." follow the character rule but are path segments, not names: a stream_url built
// from them resolves to another path (/v1/sessions/../events is /v1/events), so they are refused.
func SessionID(r *http.Request) (string, *Problem) {
	id := chi.URLParam(r, SessionIDParam)
	if !wire.SessionIDValid(id) {
		p := ProblemInvalidSession.Problem("session_id must be " + wire.SessionIDRule)
		return id, &p
	}
	if id == "." || id == ".." {
		p := ProblemInvalidSession.Problem(`session_id must not be "." or ".."`)
		return id, &p
	}
	return id, nil
}
