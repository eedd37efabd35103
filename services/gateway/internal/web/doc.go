// Package web serves the demo chat page at "/": embedded static files, no build step. The page
// posts a message to intake's POST /v1/sessions/{id}/turns (same origin under `make dev`, where
// every role shares one port), follows the session's stream with static/turnstile.js — a small
// EventSource wrapper that rebuilds the EventSource when the browser gave up on it and resumes
// from the last event ID it saw — and shows each turn's tokens, its status and a reconnecting
// indicator.
//
// Query parameters of the page: session (default: a random one), tokens and duration_ms (demo
// agent knobs sent in the turn's metadata, used by the browser test for long replies).
package web
