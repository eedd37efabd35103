// Package pool spreads an agent's upstream requests over the replicas of that upstream, the
// way a careful caller without a proxy in front must: it is the upstream.Picker of the agent's
// guard, used by the openai, http and a2a adapters alike.
//
// # Endpoints
//
// A pool's endpoints come from Sources: a fixed list of URLs, a DNS name re-resolved every
// ResolveInterval ("dns+http://agent.ns.svc:8080/", one endpoint per address, as a Kubernetes
// headless Service answers), or, for A2A, Agent Card URLs (the a2a package's "card+" entries).
// Changes are picked up without a restart. A source that fails keeps its last answer: a lookup
// outage never empties a pool, and a pool that has never known an endpoint makes turns wait
// (within their deadline) rather than fail.
//
// # Two policies
//
// Affinity (the default) is for agents that keep a conversation's state in memory: every request
// of a session — its turns, their retries, the forwarded tasks/cancel — reaches one replica. The
// route key is the session (tenant and session ID together, RouteKey). A session is placed once,
// by consistent hashing with bounded loads: it goes to the first endpoint on the hash ring from
// its key that holds fewer than ⌊LoadFactor·(sessions+1)/endpoints⌋ sessions, so no replica is
// given more than LoadFactor (1.25) times the mean, and then it stays there. When a replica joins,
// the sessions whose ring home it now is move to it (within the bound) and no other session
// moves: about 1/n of them, the price of affinity with local state. A session moves otherwise
// only when its replica leaves, is ejected, or cannot be connected to on a retry. Placements are
// forgotten after AffinityIdle without a request. The load bound counts sessions, not requests
// in flight: a bound on in-flight requests would move a session whenever its replica is busy,
// which is the context amnesia affinity exists to avoid. (github.com/buraksezer/consistent bounds
// the hash partitions per member rather than the keys, which leaves the sessions per replica to
// the luck of the hash; the table here bounds the sessions themselves.)
//
// The placements live in each worker. A session's turns run on the worker that owns its Kafka
// partition, so one worker places it; after a rebalance the new owner places it again, and
// without a spill past the bound the ring puts it on the same replica.
//
// LeastRequest is for agents whose replicas share their state: each request goes to the one with
// fewer requests in flight of two distinct endpoints drawn at random (power of two choices), and
// a retry goes to another endpoint than the request that failed.
//
// Both publish the route key with every request (x-a2a-route-key for A2A, X-Turnstile-Route-Key
// for the others), so an L7 proxy in front of the replicas can hash on it instead; the key and
// the endpoint are in each request's span event and log line ("upstream request", at debug level,
// at info when a retry changes endpoint).
//
// # Health
//
// Passive outlier ejection: EjectAfter consecutive failed requests (a connect error, a timeout, a
// reset or cut stream, a 5xx other than 503) take an endpoint out for EjectTime times its
// ejection count, at most EjectMaxTime; the count decays by one for each EjectTime the endpoint
// then stays in, so a replica that keeps failing stays out longer each time and one that recovers
// is forgiven. Overload answers (429, 503, Retry-After) are not failures: they shrink that
// endpoint's own adaptive limit. Active probes (ProbePath, by default the Agent Card for A2A)
// mark an endpoint unhealthy after ProbeFailuresToFail failed probes and healthy after one pass.
//
// The panic threshold keeps the observer from emptying the pool (seed 002: when most endpoints
// look unhealthy at once, suspect the observer): an ejection that would leave more than
// PanicThreshold of the endpoints unusable is not made, and while more than that share fails its
// probes the pool routes to every endpoint as if all were healthy. Both are logged at warn level
// and exported (turnstile_worker_upstream_pool_panic, …_ejections_suspended_total). A pool of
// one endpoint is thus never ejected.
//
// # Limits
//
// Each endpoint has its own adaptive concurrency limit and retry budget (Config.Endpoint) inside
// the agent's total (the guard's): a replica's 429/503 shrink only its own limit, and a retry
// after its failure spends from its budget and the total.
package pool
