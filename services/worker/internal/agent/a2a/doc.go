// Package a2a runs turns on a remote agent over the A2A protocol, with the official Go SDK (a2a-go)
// and its JSON-RPC transport.
//
// Each attempt sends one `message/stream` request whose message has contextId = the session ID
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
//
// When the turn's context ends while a task is running (a cancel request, a lost lease, a drain),
// `tasks/cancel` is forwarded to the remote agent with a short context of its own.
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
