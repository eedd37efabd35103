// Package agenttest is the conformance suite every agent adapter runs (demo, openai, httpagent, a2a).
//
// An adapter's test supplies a Harness: a function that, given a Scenario, returns an agent whose
// upstream plays that scenario (an httptest server speaking the adapter's real wire format, an a2a-go
// server in process, or — for the demo agent — the turn metadata knobs), and optionally a Recorder of
// what the upstream received. Every upstream answers with the demo contract's words
// (pkg/demo.Reply with Tokens set), so the suite can predict every delta whatever the adapter.
//
// The suite checks: deltas arrive in order and concatenate to the final output; a tool call precedes
// its result with the same call ID; the turn text, session and history reach the upstream; an error
// in the middle of a stream fails the run with a retryable (not permanent) error; a 429 with
// Retry-After is retried, its wait announced to the sink (an agent.Waiter) with the next try's time,
// and succeeds when the pause fits the deadline and fails fast when it does not; cancellation ends a run promptly; a sink error stops the run and is returned; many turns run
// concurrently on one agent.
//
// ChatServer is an OpenAI-compatible chat completions server for tests beyond the suite: it plays
// an answer per request, including an error object inside the stream, and counts the requests.
package agenttest
