// Package inflight is the load generator's in-flight scenario: many long, I/O-bound turns held by
// one worker at once, the way agent turns spend seconds waiting on a model.
//
// Run posts Turns turns, one per session, spread over Ramp, and follows each turn's stream from the
// gateway (?turn_id=, resumed with Last-Event-ID if it drops). The agent is the worker's openai
// adapter against a fakechat server streaming one token every Interval; every token's text carries
// its index and the time the model wrote it, so the reader checks that each turn's tokens arrive
// all, once and in order, and measures model→browser latency per token. Beside it, in the same run
// and on the same Redis, a probe measures the floor: one XADD read back by a blocking XREAD.
//
// The worker's own /metrics give the rest, sampled every second: heap and goroutine stacks in use
// (their growth over the idle worker, divided by the turns in flight, is the memory per turn), the
// process's CPU (divided by the tokens delivered), batched lease-renewal statements (per heartbeat
// interval) and publish pipelines (one Redis round trip each, per token).
package inflight
