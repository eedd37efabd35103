// Package revoke tells the gateway which API keys were revoked, so that a stream token issued to a
// revoked key stops working within seconds instead of at its expiry (TURNSTILE_STREAM_TOKEN_TTL).
//
// A stream token names the API key it was issued to (streamtoken.Claims.APIKeyID). A Watcher
// reads the IDs of the keys revoked within the token TTL from their one record, the api_keys table
// in Postgres, once per Config.Interval for the whole replica (not per stream), and keeps them in
// memory. The stream handler asks it when a stream opens (401 for a revoked key), and every open
// stream waits on Changed, so a revocation closes the streams of that key at the next read.
//
// Why Postgres and not a list in Redis: revocation is written to Postgres (apikey.Revoke, the
// `turnstile apikey revoke` command), so Postgres already knows every revocation, including one
// made while Redis was down; a Redis copy would need a second write and a reconcile from Postgres
// anyway. The gateway does not need Postgres to serve (invariant 11): a read that fails keeps the
// revocations already known, and streams go on; only revocations made during the outage wait
// until Postgres answers, and revoking needs Postgres itself. The cost is one small query per
// replica per interval.
package revoke
