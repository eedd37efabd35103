// Package card builds the A2A front door's Agent Card (served at /.well-known/agent-card.json)
// from configuration alone — name, description, version and skills from TURNSTILE_A2A_*, the
// JSON-RPC URL from TURNSTILE_A2A_PUBLIC_URL (or, unset, the origin each request came to) — so every replica serves the same card and none needs any
// state to do it. With TURNSTILE_AUTH=on the card names the API-key scheme: an HTTP bearer
// credential (Authorization: Bearer <API key>), required on every call. The card says
// capabilities.pushNotifications: push configs are stored by the native API and sent by the
// notifier role, which a deployment runs beside this one. JSON serves it so both protocol
// versions' clients read it: 0.3's members (url, preferredTransport, protocolVersion) with 1.0's
// (supportedInterfaces naming JSON-RPC 1.0, HTTP+JSON 1.0 and JSON-RPC 0.3).
package card
