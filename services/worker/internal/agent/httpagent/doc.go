// Package httpagent forwards a turn to a user's own HTTP service, so agents can be written in any
// language.
//
// The protocol is specified in docs/http-agent-protocol.md, with two JSON Schemas beside this
// file: schema/request.schema.json (the body posted) and schema/events.schema.json (one event of
// the answer), which the package embeds (Schemas) and validates every event against. In short: a
// POST of the turn as JSON with Idempotency-Key (the turn ID), X-Deadline-Epoch-Ms and
// X-Turnstile-Deadline; the answer is a 200 with NDJSON or server-sent events of delta, tool_call,
// tool_result and usage, ended by done, input_required or error.
//
// An event that does not match the schema is agent.ErrPermanent with an error naming the event
// and the field (`http agent event 3 (tool_call): missing required property "call_id"`): the turn
// fails at once, since an agent that sent it once will again, and nothing of that event is
// published. Unknown properties and types are refused too, so a misspelt field fails legibly
// instead of being dropped.
//
// input_required ends the turn successfully in wire.OutputInputRequired; usage events are added up
// into agent.Result.Usage, which the worker records with the turn's output. An error event with a
// "status" is classified like an answer of that status; without one, "overloaded" marks an
// overload signal, "retryable" a transient failure, and neither a permanent failure. A stream that
// ends without done, input_required or error was cut and is retried. Any other status is
// classified by upstream.Classify. Bounds: a header timeout, an idle timeout between events, a size
// limit per event and per answer.
package httpagent
