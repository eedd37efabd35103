package api

import (
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/pkg/region"
)

// placed answers 421 for a request naming another region's session or turn, before the key is
// checked or any store is read: the ID alone says where it belongs (pkg/region).
func (h *Handler) placed(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if owner, misdirected := h.cfg.Region.Misdirected(chi.URLParam(r, httpx.SessionIDParam), chi.URLParam(r, "turn_id")); misdirected {
			// Counted as route "misdirected": a client bypassing the router (docs/METRICS.md).
			h.refuse(w, "misdirected", region.Misdirected(owner))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// parseTurnID reads a turn ID as clients send it: a bare UUID or this region's "<code>-<uuid>".
// Another region's prefix never gets here (placed); in single-region mode only the bare form is a
// turn ID, as it always was.
func (h *Handler) parseTurnID(s string) (uuid.UUID, bool) {
	code, id, err := region.ParseUUID(s)
	if err != nil || (code != "" && code != h.cfg.Region.Code) || id == uuid.Nil {
		return uuid.Nil, false
	}
	return id, true
}

// turnIDShape is the refusal of a malformed turn ID.
func (h *Handler) turnIDShape() string {
	if h.cfg.Region.Code == "" {
		return "turn_id must be a UUID"
	}
	return "turn_id must be a UUID or " + h.cfg.Region.Code + "-<uuid>"
}

// showTurnID is a turn ID as clients see it: prefixed by this region.
func (h *Handler) showTurnID(id uuid.UUID) string {
	return region.Prefix(h.cfg.Region.Code, id.String())
}

// NewSession is the 201 body of POST /v1/sessions.
type NewSession struct {
	SessionID string `json:"session_id"`
}

// postSession mints a session ID for a client that wants the server to choose one: a UUIDv7,
// prefixed by this region, so a router places the session here without a lookup. Nothing is
// stored: a session exists from its first turn, as a client-chosen one does.
func (h *Handler) postSession(w http.ResponseWriter, _ *http.Request) {
	const route = "post_session"
	id := region.NewID(h.cfg.Region.Code)
	h.requests.WithLabelValues(route, "ok").Inc()
	w.Header().Set("Location", "/v1/sessions/"+id+"/turns")
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, http.StatusCreated, NewSession{SessionID: id})
}
