// Package admission decides whether a process takes one more long-lived stream, whichever front
// door it comes through: the gateway's event streams, A2A's message/stream and tasks/resubscribe,
// the AI SDK's chat streams, LangGraph's run streams, joins and waits. One Budget a process
// (pkg/app's Deps.Admission) counts them all against the process's cap on open streams, one
// session's cap, and one tenant's share of the process's cap, so one tenant cannot leave the
// others no slot through any door. A stream holds its Slot from its admission to its end, parked
// or not, between reconnects to the gateway or not.
//
// A protocol front door's stream is backed by a gateway stream it opens over HTTP
// (pkg/frontdoor). That gateway stream carries the front door's ticket (TicketHeader); a gateway
// of the same Budget lets it ride on the front door's slot, so one client's stream is counted
// once. A gateway of another process does not know the ticket and counts it as its own stream.
//
// Refusals: the gateway answers inside a 200 with a retry hint (package sse: EventSource gives up
// on anything else); the protocol front doors answer Refusal.Problem — 503 over-capacity or 429
// tenant-stream-share, each with a jittered Retry-After — or, on A2A's JSON-RPC route, a JSON-RPC
// error with that HTTP status.
//
// It counts admitted streams only; tracking them (drain, cut, wait) is pkg/lifecycle's Streams,
// and parking the gateway's pkg/park's.
package admission
