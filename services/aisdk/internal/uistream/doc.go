// Package uistream renders one turn of a session's native event stream as the AI SDK's UI message
// stream protocol (npm `ai` v5+, header `x-vercel-ai-ui-message-stream: v1`): `start`,
// `text-start`/`text-delta`/`text-end`, `tool-input-available`/`tool-output-available`, `finish`,
// `error` and `abort` parts, each one SSE `data: {json}` line, then `data: [DONE]`.
//
// The rendering is a pure function of the turn's native events in order (Renderer), so a stream
// rendered again from the turn's first event yields the same parts with the same ids. Both resume
// paths rely on it:
//   - the AI SDK's default resume (GET without Last-Event-ID) is answered with the whole active
//     turn from its first event; the SDK's DefaultChatTransport treats a resumed stream as a replay
//     and resets the assistant message at its first `start`, so the message is rebuilt once;
//   - a client that sends Last-Event-ID (every part carries the native id `<epoch>:<entry>` of the
//     event it came from) is answered from the turn's first event too, with every part of an event
//     at or before the cursor dropped, so it gets exactly the parts after it. A cursor of another
//     epoch names history that no longer exists (the epoch rule): it gets the whole turn again,
//     starting with `start`, the protocol's honest reset.
//
// A taken-over turn runs again from its start as a new attempt (turn.retrying), and the new
// attempt's deltas repeat what the client already shows. The renderer keeps the units it has
// shown (deltas, tool calls and results) and drops a new attempt's units while they equal them,
// so a deterministic agent's retried answer appears once. A unit that differs from what was shown
// (a model that answers otherwise the second time) closes the text part and the rest of the new
// attempt follows in a new one: nothing shown is silently retracted.
package uistream
