package sse

import (
	"net/http"

	"github.com/google/uuid"

	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/pkg/region"
	"github.com/turnstile-run/turnstile/pkg/streams"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

// openRequest is what a request to open a stream asks for. parseOpen is the one place that reads
// it from the request.
type openRequest struct {
	// SessionID is the client's session ID, from the path. Session is its key, the tenant's session,
	// set once the token named the tenant (Handler.ServeHTTP).
	SessionID string
	Session   wire.SessionKey
	// Token is the stream token: Authorization: Bearer first, else ?access_token= (EventSource
	// cannot set headers).
	Token string
	// TurnID, from ?turn_id=, follows one turn and ends the stream at its terminal event.
	TurnID string
	// Cursor is as sent: the Last-Event-ID header first, ?last_event_id= only without it (a
	// browser's EventSource re-sends its original URL on every reconnect, so the query is stale
	// then). CursorSource is "header", "query" or "" (no cursor).
	Cursor, CursorSource string
	// After is the parsed cursor, nil without one and for "$".
	After *streams.Cursor
	// Live is the cursor "$": live events only.
	Live bool
	// Invalid is a problem with the query or cursor. It is answered only after the token was
	// checked, so a caller without a valid token learns nothing more than that.
	Invalid *httpx.Problem
}

// parseOpen reads an open-stream request of region place. A malformed session ID, or a session or
// turn ID of another region (421, pkg/region), is its problem result, which is answered first;
// problems of the other parameters are left in Invalid.
func parseOpen(r *http.Request, place region.Local) (openRequest, *httpx.Problem) {
	sessionID, bad := httpx.SessionID(r)
	if bad != nil {
		return openRequest{}, bad
	}
	q := r.URL.Query()
	o := openRequest{SessionID: sessionID, TurnID: q.Get("turn_id")}
	if owner, misdirected := place.Misdirected(sessionID, o.TurnID); misdirected {
		p := region.Misdirected(owner)
		return openRequest{}, &p
	}
	if o.Token = httpx.BearerToken(r); o.Token == "" {
		o.Token = q.Get("access_token")
	}
	if o.Cursor = r.Header.Get("Last-Event-ID"); o.Cursor != "" {
		o.CursorSource = "header"
	} else if o.Cursor = q.Get("last_event_id"); o.Cursor != "" {
		o.CursorSource = "query"
	}

	if o.TurnID != "" && place.Code == "" {
		if _, err := uuid.Parse(o.TurnID); err != nil {
			p := httpx.ProblemInvalidTurnID.Problem("turn_id must be a UUID")
			o.Invalid = &p
			return o, nil
		}
	} else if o.TurnID != "" {
		// The events name the turn as "<region>-<uuid>"; either form the client holds follows it.
		_, id, err := region.ParseUUID(o.TurnID)
		if err != nil {
			p := httpx.ProblemInvalidTurnID.Problem("turn_id must be a UUID or " + place.Code + "-<uuid>")
			o.Invalid = &p
			return o, nil
		}
		o.TurnID = region.Prefix(place.Code, id.String())
	}
	switch o.Cursor {
	case "":
	case "$":
		o.Live = true
	default:
		c, err := streams.ParseCursor(o.Cursor)
		if err != nil {
			p := httpx.ProblemInvalidCursor.Problem(`Last-Event-ID must be "<epoch>:<ms>-<seq>" as sent in an event id, or "$" for live events only`)
			o.Invalid = &p
			return o, nil
		}
		o.After = &c
	}
	return o, nil
}
