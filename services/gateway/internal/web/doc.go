// Package web serves the demo chat page at "/": embedded static files, no build step. The page
// posts a message to intake's POST /v1/sessions/{id}/turns (same origin under `make dev`, where
// every role shares one port), follows the session's stream with static/turnstile.js — a small
// EventSource wrapper that rebuilds the EventSource when the browser gave up on it and resumes
// from the last event ID it saw — and shows each turn's tokens, its status and a reconnecting
// indicator.
//
// A reload shows the conversation again: a page without a session mints one and writes it into
// the address, and a page given a session first lists its turns (GET /v1/sessions/{id}/turns) to
// show the user's messages, then follows the stream from the session's oldest retained event for
// the replies. A turn whose events arrive before its input is known (it was still queued when the
// list was read) is looked up with GET /v1/turns/{id}. The page logs no console errors; the
// browser tests in cmd/turnstile/integration hold it to that.
//
// Query parameters of the page: session (default: a random one, then kept in the address), tokens
// and duration_ms (demo agent knobs sent in the turn's metadata, used by the browser tests).
package web
