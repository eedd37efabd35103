// Package forward is the router's request path: it finds the region that owns a request (the ID
// in its path or A2A params, by pkg/region's owner rule; for a request without one, its tenant's
// home region, read from the API key or stream token without a lookup) and forwards the request there unchanged,
// with httputil.ReverseProxy over one tuned keep-alive Transport per region.
//
// Nothing is rewritten: the body goes byte for byte (an A2A body is read to find its owner, then
// sent as read), Authorization, Last-Event-ID and every other end-to-end header pass through, and
// answers — streams included — are flushed as they arrive (FlushInterval -1), so native SSE, A2A
// message/stream and tasks/resubscribe, LangGraph joins and AI SDK streams behave as they do
// against the region itself. X-Forwarded-For, -Host and -Proto are set, so a region's A2A Agent
// Card names the router's address rather than the region's.
//
// # When the owner is down
//
// A region the health monitor holds down is answered at once, without dialling: 503 with a
// jittered Retry-After and the region-unavailable problem naming the owner (on the A2A endpoint,
// the JSON-RPC error region.RPCRegionUnavailable with data.region, HTTP status 503 kept). A
// forward that cannot connect within the connect timeout is answered the same way and marks the
// region down, so the next request does not wait either; probes bring it back. Never "not found":
// the work still exists in its region.
//
// A request that carries an ID always goes to the ID's owner. A request without one goes to its
// tenant's home region; when that is down and the tenant's policy is failover, it goes to the next
// healthy region of the map instead (the new session, task or thread is then minted there and
// names that region from then on). A failed forward is not retried on another region: the body
// may have been sent, and a retried creation could make two.
//
// # Draining
//
// Close ends every forward in flight (their clients see the connection drop and reconnect to
// another router replica, streams resuming from their Last-Event-ID), so a router's shutdown does
// not wait for streams that may last for hours.
package forward
