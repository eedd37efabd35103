// Package router is turnstile's router role: the stateless front of two or more regions, which
// makes them one service for their clients. It forwards each request to the region that owns it,
// found in the request itself without any lookup (pkg/region's owner rule): the region code an ID
// starts with (session, turn, chat, thread IDs in the path; task and context IDs in an A2A
// JSON-RPC body), or for a request without one — new work, or an ID a client chose — the home
// region of the tenant its API key names in the region map (TURNSTILE_REGIONS_FILE or
// TURNSTILE_REGIONS). Bodies and streams pass unchanged (internal/forward).
//
// Region health comes from probes of each region's /readyz and from failed forwards
// (internal/health). A request whose owner is down is answered 503 with Retry-After and the
// region-unavailable problem naming the owner, at once and never as "not found"; a tenant whose
// policy is failover has its new work sent to the next healthy region instead, while its work
// carrying an ID keeps that answer until the owner returns.
//
// The router holds no state: any replica serves any request, and a replica that dies loses
// nothing (its streams' clients reconnect to another and resume from Last-Event-ID). It serves
// every path, so it runs in a process of its own (TURNSTILE_ROLES=router, or the turnstile-router
// binary), never beside the roles that serve the API.
package router
