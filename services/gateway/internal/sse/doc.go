// Package sse serves a session's events to browsers as Server-Sent Events with gap-free resume.
//
// The cursor is the Last-Event-ID header, else the last_event_id query parameter (a browser's
// EventSource re-sends its original URL on reconnect, so the header must win). Event IDs are
// "<epoch>:<entry id>". Replay is exclusive of the cursor and joins the live tail without gap or
// duplicate: the handler subscribes to the session's shared feed first, replays from Redis second,
// and then skips live entries it already sent. A cursor from another epoch, or older than retained
// history, gets an explicit stream.reset event, never a silent jump.
//
// Anything retryable (draining, a slow client cut loose) ends a 200 stream with a retry hint; non-200
// answers are kept for what must not be retried (bad cursor, bad session ID).
package sse
