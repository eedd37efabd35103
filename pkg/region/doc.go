// Package region is what two or more turnstile regions agree on so that they act as one service:
// region codes, IDs that name the region owning them, the region map, and how a request's tenant
// and owner are found without a lookup. The regions (intake, a2a, langgraph, the apikey command)
// mint and check IDs with it; the router role forwards with it.
//
// # Region codes
//
// TURNSTILE_REGION names the region a process serves: 2–8 characters of [a-z][a-z0-9]{1,7}
// (euw1, use1). Unset is single-region mode: nothing is prefixed, nothing is checked, and every
// route behaves as it did before regions existed.
//
// # IDs
//
// Every ID a region mints reads "<region>-<rest>" (NewID: "euw1-" and a UUIDv7): turn IDs as the
// API and the events show them, A2A task IDs and server-derived context IDs, LangGraph thread and
// run IDs, server-minted session IDs (POST /v1/sessions) and API key IDs.
//
// Storage keeps what it kept before: turns.turn_id stays a bare uuid, the Kafka envelope carries
// the bare turn ID plus the region that accepted it (wire.Envelope.Region), and every external form
// — API answers, Location, stream URLs, events, task and run IDs — is the prefixed one, made at
// the edge from the envelope's region. Every route accepts both the prefixed form of its own
// region and the bare UUID (ParseUUID), so clients holding IDs from before a region was set keep
// working. Session, thread and context IDs are stored as the client sends them, prefix included
// (they are free text; the prefix is part of the name).
//
// # The owner rule (Map.Owner)
//
// Take the text before the first "-"; if it is a region code in the map, that region owns the ID.
// Otherwise — a client-chosen session ID, an un-prefixed ID minted before regions — the owner is
// the tenant's home region. The rule needs no lookup and is deterministic, so a client-chosen
// session ID always lands in the same region.
//
// A region that is sent another region's ID directly (bypassing the router) answers 421
// Misdirected Request naming the owner (problem type "misdirected", JSON-RPC error
// RPCMisdirected on A2A), before touching any store: Local.Minted for IDs only turnstile mints
// (turn, task and run IDs, whose shape "<code>-<uuid>" cannot be a client's choice), and
// Local.Chosen for IDs a client may choose (session, thread and context IDs), which count as
// foreign only when their prefix is a region of the map, so a client's "user-1234" session stays
// an ordinary session.
//
// # The region map
//
// One JSON document, from TURNSTILE_REGIONS_FILE (a path) or TURNSTILE_REGIONS (inline), read by
// the router and by the regions alike (Load):
//
//	{"regions": [{"code": "euw1", "url": "http://127.0.0.1:18080"},
//	             {"code": "use1", "url": "http://127.0.0.1:28080"}],
//	 "default_home": "euw1",
//	 "tenants": [{"name": "acme", "home": "euw1", "policy": "wait", "key_ids": ["euw1-3f9a0c1d2e4b"]}]}
//
// The order of regions is the failover order: the next healthy region after a tenant's home,
// wrapping (Map.Next). A tenant's policy is "wait" (the default: its work waits for its home
// region) or "failover" (new work goes to the next healthy region; work carrying an ID keeps
// answering 503 naming its owner).
//
// # The tenant of a request (Map.Tenant)
//
// The router never looks anything up and never checks credentials (the owning region does). It
// reads the key ID out of the API key ("ts_<key id>_<secret>"; key IDs are not secret): the
// tenant is the map's tenant listing that key ID; failing that, a key ID with a region prefix
// names its home region with policy wait; failing that (or without a key, as with auth off), the
// map's tenant named "default", else default_home with policy wait.
//
// # Keys in several regions
//
// A failover tenant's key must work in every region it may land in, so `turnstile apikey import
// --tenant T --key ts_...` stores an existing key (same ID, same hash) in another region.
package region
