package api

import (
	"net/http"
	"net/url"

	"github.com/turnstile-run/turnstile/pkg/httpx"
)

// StreamGrant is the answer to POST /v1/sessions/{session_id}/stream-token.
type StreamGrant struct {
	SessionID   string `json:"session_id"`
	StreamURL   string `json:"stream_url"`
	StreamToken string `json:"stream_token"`
}

// streamToken mints a stream token for a session of the caller's tenant, so a client (or a protocol
// front door re-subscribing to a task) can follow a session without posting a turn. It looks
// nothing up: the token names the tenant's own session (wire.SessionKey), so it reads nothing of
// another tenant's, and it keeps working while Postgres is down. Like status, it is never refused
// for capacity.
func (h *Handler) streamToken(w http.ResponseWriter, r *http.Request) {
	const route = "stream_token"
	sessionID, bad := httpx.SessionID(r)
	if bad != nil {
		h.refuse(w, route, *bad)
		return
	}
	h.requests.WithLabelValues(route, "ok").Inc()
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, http.StatusOK, StreamGrant{
		SessionID:   sessionID,
		StreamURL:   "/v1/sessions/" + url.PathEscape(sessionID) + "/events",
		StreamToken: h.d.Signer.SignKey(apiKeyOf(r), tenantOf(r), sessionID),
	})
}
