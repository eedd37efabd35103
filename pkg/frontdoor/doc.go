// Package frontdoor is the client of turnstile's native API that every protocol front door (A2A,
// LangGraph-compatible runs, AI SDK chat) is built on.
//
// A front door is a stateless translator: it accepts, reads and cancels turns through intake's
// native routes and follows a session through the gateway's native event stream, forwarding the
// caller's credential as it came. It never touches Kafka, Redis or Postgres for a turn itself, so
// it inherits by construction what the native API guarantees and keeps no copy of that logic:
//
//   - auth and tenancy: the tenant is the one the forwarded API key names, so another tenant's
//     session or turn is not found, exactly as on the native routes;
//   - admission: quotas, backlog age and Kafka faults are answered (429/503 with Retry-After) before
//     anything is produced, and a front door relays them as a *Problem;
//   - idempotency and double-texting: Idempotency-Key and multitask go through unchanged;
//   - streams: the cursor, epoch and stream.reset rules, shared readers, caps, drain and revocation
//     of the gateway. Stream reconnects the way a browser's EventSource does when the gateway
//     closes a stream it wants resumed (a drain, a full replica), so a front door's client sees one
//     gap-free sequence of native event IDs across gateway restarts.
//
// Static stability follows: a front door's sends need intake, which needs only Kafka; its streams
// need the gateway, which needs only Redis.
//
// The price is one loopback HTTP hop per call. In the all-in-one binary and make dev the front
// doors call the process's own listener (FromConfig); split deployments name intake and the
// gateway with TURNSTILE_INTAKE_URL and TURNSTILE_GATEWAY_URL.
package frontdoor
