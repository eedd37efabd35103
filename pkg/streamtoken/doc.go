// Package streamtoken signs and verifies the tokens intake hands out in its 202 and the gateway
// requires to open a session's stream. A token is scoped to one tenant and session and expires; it
// is an HMAC-SHA256 over its claims with a named key, so keys rotate: the newest key signs, every
// configured key verifies.
//
// Format: base64url(claims JSON) "." base64url(HMAC) — compact, URL-safe (it may travel in the
// access_token query parameter, since EventSource cannot set headers), and opaque to clients.
//
// The package takes its own Options (keys and TTL, zero meaning default); intake and the gateway
// map pkg/config's TURNSTILE_STREAM_TOKEN_* settings onto them.
package streamtoken
