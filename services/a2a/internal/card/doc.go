// Package card builds the A2A front door's Agent Card (served at /.well-known/agent-card.json)
// from configuration alone — name, description, version and skills from TURNSTILE_A2A_*, the
// JSON-RPC URL from TURNSTILE_A2A_PUBLIC_URL (or, unset, the origin each request came to) — so every replica serves the same card and none needs any
// state to do it. With TURNSTILE_AUTH=on the card names the API-key scheme: an HTTP bearer
// credential (Authorization: Bearer <API key>), required on every call. The card says
// capabilities.pushNotifications: push configs are stored by the native API and sent by the
// notifier role, which a deployment runs beside this one.
package card
