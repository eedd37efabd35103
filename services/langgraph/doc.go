// Package langgraph is the langgraph role: LangGraph-compatible threads and runs, so clients
// written for LangGraph Platform (@langchain/langgraph-sdk's Client, its React useStream hook, or
// any Agent Protocol client) run against turnstile unchanged and get its guarantees: a run
// survives its worker's death and completes once, run creation is idempotent with an
// Idempotency-Key, a rejoin with Last-Event-ID misses and repeats nothing, and one slow thread does
// not hold up the others.
//
// Decision: a role of its own, like the other protocol front doors, rather than routes split
// between intake and the gateway. It is a stateless translator in front of the native API
// (pkg/frontdoor): runs are posted to intake and followed on the gateway with the caller's own
// credential, so auth, tenancy, admission, quotas, idempotency, double-texting and the stream
// cursor rules are the native API's by construction. The one state of its own is the thread table
// (internal/threads), since LangGraph threads exist before their first run. Its routes (/threads…)
// do not overlap the native /v1 paths, so `make dev` serves both on one port.
//
// Layout: internal/api serves the routes, internal/render maps turns and native events to
// LangGraph's messages and stream modes, internal/threads stores threads, internal/web serves the
// useStream demo page built from clients/langgraph (at /langgraph/), internal/store holds the
// LangGraph store's items.
package langgraph
