// Package agent defines what a worker runs for a turn: one small interface, Agent, and the Sink it
// emits events through. Implementations live in subpackages (demo, openai, httpagent, a2a) and all
// pass the conformance suite in agenttest.
//
// The worker owns everything around the call — the claim, the lease, fencing, publishing, the
// completion transaction — so an agent only turns a turn plus its session history into events and a
// final output. Its context carries the turn's absolute deadline and is cancelled when the turn is
// cancelled, its lease is lost or the worker drains; an agent must return promptly when it is done.
//
// A Sink may also be a Waiter (found by type assertion): the upstream guard announces through it
// every wait on the upstream, which the worker publishes as turn.waiting. It may also be a Flusher:
// the guard flushes it just before each request to the upstream, so the events the worker holds
// back for an agent that might answer at once (turn.started) go out while the request is under way.
package agent
