// Package route reads, from a request alone, the ID that names the region owning it: a path
// parameter of the native API (session, turn and chat IDs, an agent's chat
// /v1/agents/{name}/chat/{id}), of the LangGraph routes (thread IDs; a run lives in its thread's
// region) and of the A2A HTTP+JSON binding (/a2a/rest/tasks/{id}..., /a2a/{agent}/rest/...), or,
// on the A2A JSON-RPC endpoints (/a2a and an agent's /a2a/{agent}) and the binding's message
// routes, the task or context ID in the body (0.3's and 1.0's methods alike). It knows nothing of regions: pkg/region's owner rule turns the ID into a
// region, and a request that carries no ID (POST /v1/sessions, POST /threads, thread-less runs, an
// A2A message without taskId or contextId, the Agent Card, the OpenAPI document) is unowned and
// goes to its tenant's home region — or, for a failover tenant whose home is down, to the next
// healthy one, since it holds no state anywhere yet.
//
// The A2A body is only read, never changed: the router forwards it byte for byte.
package route
