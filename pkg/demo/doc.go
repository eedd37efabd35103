// Package demo is the contract of turnstile's deterministic demo agent: the reply it streams for an
// input and the knobs a turn's metadata can set. The worker's demo agent implements it; the
// end-to-end tests and the load generator use it to predict every event a turn must produce.
//
// Knobs come from the turn's metadata under "demo":
//
//	{"demo": {"tokens": 20, "duration_ms": 400, "tool": true, "fail_attempts": 1, "panic_attempts": 0}}
//
// tokens sets the reply's length in words (default: the words of the default reply); duration_ms
// spreads the reply over that long instead of the configured per-word delay; tool makes the agent
// call a "clock" tool before answering; fail_attempts fails the first N attempts with an error and
// panic_attempts panics in the first N attempts; fail_after_tool_attempts fails the first N attempts
// right after the tool call, and a later attempt reuses the tool result an earlier one published
// (the result names the attempt that ran the tool); end_state ("input-required" or "auth-required")
// ends the turn with that output state after its reply, as an agent that waits for the user does.
package demo
