// Package sse serves a session's events to browsers as Server-Sent Events with gap-free resume.
//
// The cursor is the Last-Event-ID header, else the last_event_id query parameter (a browser's
// EventSource re-sends its original URL on reconnect, so the header must win); "$" asks for live
// events only. Event IDs are "<epoch>:<entry id>". Replay is exclusive of the cursor and joins the
// live tail without gap or duplicate: the handler subscribes to the session's shared feed first,
// replays from Redis second, and then skips live entries it already sent. A cursor from another
// epoch, or one whose later history was trimmed, gets an explicit stream.reset event (with id
// "<epoch>:0-0", so the client's next resume starts at the new generation), never a silent jump.
// A stream whose generation changes under it ends, so its client's resume gets the reset.
//
// Every parameter of an open (session, cursor and its source, turn_id, token) is read by one
// function, parseOpen in params.go. The session ID is checked first; the token next, so a caller
// without a valid one learns nothing about its other parameters; then turn_id and the cursor.
//
// Answers. Anything retryable — draining, a process or session over its cap of open streams, a
// tenant over its share of that cap (pkg/admission, counting every front door's streams, so one
// tenant cannot leave the others no slot), a slow client cut loose, Redis briefly unavailable —
// ends a 200 stream with a jittered "retry:" and a comment, because EventSource gives up for good on any non-200. Non-200 is kept for
// what must not be retried, each a problem type of pkg/httpx's catalog: 400 for a malformed session
// ID, turn ID or cursor; 401 for a missing or invalid (unauthenticated) or expired
// (stream-token-expired) stream token, or one whose API key was revoked (package revoke; an open
// stream of a revoked key ends with stream.revoked); 404 for a valid token of another session, so
// that another tenant's session looks exactly like one that does not exist; 204 for a ?turn_id=
// follower that reconnects after the turn's terminal event (EventSource stops on 204).
//
// Stream tokens (TURNSTILE_AUTH=on) come from Authorization: Bearer, else the access_token query
// parameter (EventSource cannot set headers). Query tokens can end up in proxy logs; they are
// short-lived and scoped to one session for that reason. With auth off the gateway logs a warning
// at start and serves any session.
//
// Slow clients: each write is bounded by WriteTimeout, and a stream that falls more than the hub's
// buffer behind the live tail is closed; either way its client resumes from its cursor and the
// others are never stalled. Drain closes streams in shuffled batches a jittered interval apart,
// each with its own jittered retry, so clients return to other replicas without a herd.
//
// A request to open a stream goes through four steps in handler.go: parse (parseOpen), authorize
// (auth.go), admit (pkg/admission's budget, after the drain check; the process's one budget,
// shared with its other front doors, so a stream a front door of this process opened with its
// slot's ticket rides on that slot) and open (subscribe, replay,
// go live). From its admission a stream is one value of type stream (stream.go), tracked by the
// handler's embedded lifecycle.Streams (Drain, Cut, Wait) and parked in a pkg/park lot.
//
// Idle streams. Over HTTP/1.x the handler takes the connection over and returns (net/http's
// buffers and goroutine go), and once the stream has replayed and gone live it parks (pkg/park): no
// goroutine of its own, only its state. Whatever needs it to act wakes it — the hub's readers when
// its session has entries (hub.SubscribeFunc), the lot's keep-alive wheel, Drain and Cut, the
// revocation watcher (the lot's Signal, selecting the streams of a newly revoked key), the lot's
// poller when its client leaves — and writes stay bounded by WriteTimeout, so a slow client holds
// only the goroutine of its own wake.
// A taken-over stream keeps no request context (chi's is pooled), only the request's trace.
// HTTP/2 streams cannot be taken over; they run on their handler's goroutine, woken the same way.
//
// HTTP/2. The server speaks HTTP/2 cleartext with prior knowledge (h2c) beside HTTP/1.1 on the
// same port (pkg/httpx.NewServer, shared by every role): the topology of a gateway behind an L7
// proxy that speaks HTTP/2 upstream, where many browsers' streams share a few connections. A
// connection carries at most httpx.MaxConcurrentStreams streams at once; the proxy opens more
// connections beyond that.
//
// CORS: origins in the allow-list (or "*") get Access-Control-Allow-Origin for their own origin and
// preflights for the Authorization and Last-Event-ID headers; never credentials, since streams
// authenticate with tokens rather than cookies.
package sse
