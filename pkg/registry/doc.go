// Package registry holds the wire shapes of turnstile's agent registry (docs/REGISTRY.md), which
// the intake serves, replicas write through (package client) and workers read from (package
// snapshot).
//
// A replica of a catalog agent registers under the agent's name and gets an instance ID, an epoch
// and a lease; it keeps the registration by renewing it with that epoch before the lease runs out.
// The epoch is a fencing token: a registration of the same instance ID by a replacement raises it,
// and a renewal that names an older one is refused (412), so a replica that was paused past its
// lease cannot bring a replaced endpoint back. Readers hold a snapshot of an agent's
// registrations tagged with the registry's revision and follow the changes since it.
package registry
