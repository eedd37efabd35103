// Package httpagent forwards a turn to a user's own HTTP service, so agents can be written in any
// language.
//
// The request is a POST of application/json to the configured URL:
//
//	{"turn_id": "…", "session_id": "…", "tenant": "…", "attempt": 1, "text": "…", "metadata": {…},
//	 "deadline": "2026-01-01T00:00:00Z", "history": [{"seq": 1, "turn_id": "…", "role": "user", "content": "…"}],
//	 "prior": [{"type": "turn.tool_call", "attempt": 1, "data": {…}}]}
//
// with the headers Idempotency-Key (the turn ID: a retry of the same turn carries the same key) and
// the turn's absolute deadline as X-Deadline-Epoch-Ms (Unix milliseconds, what turnstile's intake
// reads) and X-Turnstile-Deadline (RFC 3339, kept for services written against it). The service answers 200 with a stream of events, either NDJSON
// (application/x-ndjson: one JSON object per line) or server-sent events (text/event-stream: the
// event name is the type, the data the object). Each object has a "type":
//
//	{"type": "delta", "text": "…"}
//	{"type": "tool_call", "call_id": "…", "name": "…", "arguments": {…}}
//	{"type": "tool_result", "call_id": "…", "result": {…}, "error": "…"}
//	{"type": "error", "message": "…", "retryable": true, "overloaded": false, "status": 503, "retry_after": 1.5}
//	{"type": "done", "output": "…"}   // output defaults to the concatenated deltas
//
// An error with a "status" (an HTTP status) is classified like an answer of that status, so a
// service can report a 401 or a 429 it met after its answer began; without one, "overloaded" marks
// an overload signal, "retryable" a transient failure, and neither a permanent failure.
// "retry_after" (seconds, optional) is the pause it asks for before a retry.
//
// A stream that ends without "done" or "error" was cut and is retried by the worker. Any other status
// is classified by upstream.Classify (429/503 shrink the limit and honour Retry-After; other 4xx fail
// the turn at once). Bounds: a header timeout, an idle timeout between events, a size limit per
// event and per answer.
package httpagent
