// Package a2a runs turns on a remote agent over the A2A protocol's JSON-RPC binding, in protocol
// 1.0 when the agent's card offers it and 0.3 otherwise.
//
// The version is read from the Agent Card at the endpoint's origin (/.well-known/agent-card.json)
// before the first request to an endpoint and again once Config.CardTTL (5 minutes) has passed: a
// card whose supportedInterfaces list JSON-RPC at protocol version 1.0 (any 1.0.x) makes the
// endpoint a 1.0 one; a card that offers no 1.0 JSON-RPC, or no card (404, a body that is no card),
// makes it a 0.3 one. A card refused for now (429, 5xx) sends that request in 0.3, as a request
// naming no version is read, and is read again for the next one; a card that cannot be fetched
// (connection refused) fails the attempt as the request itself would. Requests go to the endpoint
// as configured (or picked by the pool), whichever version: the card decides how to speak, not
// where. 0.3 is spoken with the official Go SDK (a2a-go 0.3) and its JSON-RPC transport; 1.0 with
// the types generated from the specification's proto (pkg/a2apb), A2A-Version: 1.0 on every
// request and the PascalCase methods, each stream event turned into 0.3's (pkg/a2atask), so one
// loop relays both. A 1.0 JSON-RPC error matches a2a-go's error of the same code.
//
// Each attempt sends one `message/stream` (1.0: `SendStreamingMessage`) request whose message has contextId = the session ID
// (minted by turnstile, so every turn of a conversation routes to the same remote context) and
// messageId = the turn ID (stable across attempts, so the remote side can deduplicate a retry). The
// session history travels in the message metadata under "turnstile/history" for remote agents that
// keep no state of their own, beside the turn's own metadata (its keys as the client sent them,
// next to turnstile's namespaced ones). Every request carries the turn's absolute deadline in
// X-Deadline-Epoch-Ms, the header turnstile's intake reads. The events of the task map to turn
// events:
//
//   - artifact-update text parts, and text parts of a working status message, become turn.delta;
//     an update that replaces an artifact already streamed (append false, as an agent sends its
//     whole text with the last chunk) adds only the text beyond what was streamed, so the answer
//     is not shown twice;
//   - data parts {"tool_call": {"call_id", "name", "arguments"}} and
//     {"tool_result": {"call_id", "result", "error"}} become turn.tool_call and turn.tool_result;
//   - data parts {"custom": {"name", "data"}} become turn.custom (an event of the agent's own, in
//     order with the rest: LangGraph clients read it in the custom stream mode); other data parts
//     are no part of the answer and are dropped;
//   - a final completed status ends the turn; its output is the streamed text (or, when nothing was
//     streamed, the text of the final message and the task's artifacts);
//   - input-required and auth-required end the turn as a completed status does, with that state as
//     the output's (wire.Output.State): the turn succeeds waiting for the user, and the session's
//     next turn carries the answer (the A2A front door keeps its task open meanwhile);
//   - failed is a retryable error, rejected is permanent (no retry can change the remote's mind),
//     canceled ends the attempt with an error;
//   - a plain Message answer (no task) is one delta and the output.
//   - metadata "usage" (UsageKey: {"input_tokens", "output_tokens", "total_tokens", "model"}) on
//     the task, an update, a status message or a message answer is the task's token usage so far;
//     the last one reported is recorded with the turn's output (wire.Output.Usage).
//
// When the turn's context ends while a task is running (a cancel request, a lost lease, a drain),
// `tasks/cancel` (1.0: `CancelTask`) is forwarded to the remote agent with a short context of its own.
//
// Over a pool of replicas (package pool) the agent keeps one SDK client per endpoint and sends each
// request, and the cancel of its task, through the client of the endpoint the pool picked; every
// request carries the route key in x-a2a-route-key, and a "task not found" answer is counted
// against the endpoint that gave it. Endpoint entries may be Agent Card URLs ("card+<URL>",
// CardSource), and the pool probes the Agent Card by default (ProbePath).
//
// The SDK reports non-200 answers as a bare string, so the agent's HTTP transport turns them into
// upstream.StatusError (with Retry-After) before the SDK sees them: 429/503 then shrink the adaptive
// limit like for every other upstream.
package a2a
