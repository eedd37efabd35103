// Package openai is an agent backed by any OpenAI-compatible chat completions API, streamed.
//
// A turn becomes one request with the session history as prior messages and the turn's text as the
// user message, "stream": true and usage reporting on. The answer is read as server-sent events: each
// `data:` line is a chat.completion.chunk whose content deltas become turn.delta events; tool-call
// deltas are assembled by index (id and name arrive first, arguments in fragments) and, when the
// model finishes with "tool_calls", each call is announced (turn.tool_call), run from the configured
// tools and answered (turn.tool_result) before the conversation continues with another request; the
// usage chunk is kept in the result; `data: [DONE]` ends the stream. An `error` object inside the
// stream (as a data line, or an event named "error"), or a stream cut before [DONE], fails the call.
// The error object is read for the HTTP status it stands for — a numeric code, or a code or type
// such as "rate_limit_exceeded", "invalid_api_key", "permission_error" or "server_error" — so the
// guard classifies it like that status, and for the pause it asks for ("Please try again in 1.5s.",
// else the answer's Retry-After).
//
// Every request goes through the agent's upstream.Guard: concurrency limit, retry budget, Retry-After
// within the deadline. A request that already produced deltas is not retried (they are published);
// a tool result an earlier attempt of the same turn already published (agent.Turn.Prior) is reused
// for the same tool and arguments instead of running the tool again.
package openai
