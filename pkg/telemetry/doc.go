// Package telemetry is turnstile's tracing: an OpenTelemetry tracer provider per process, and the
// carriers that move one turn's trace context along its path — HTTP headers into intake, Kafka record
// headers from intake to the worker, and the `tp` field of each stream entry from the worker to the
// gateway — so one turn is one trace across the three services.
//
// Decisions:
//   - Spans are always made (so logs carry trace_id and context propagates), but exported only when
//     Options.OTLPEndpoint (TURNSTILE_OTLP_ENDPOINT) names an OTLP/HTTP collector: export is off by
//     default. Options.SampleRatio (TURNSTILE_TRACE_SAMPLE_RATIO) samples new traces; a caller's
//     decision (the traceparent's sampled flag) is kept. Its default follows export: 1 with a
//     collector, 0 without, because a sampled span is recorded in full whether or not anything
//     exports it, while an unsampled one still has its IDs.
//   - The package takes its own Options; pkg/app maps pkg/config's settings onto them.
//   - The provider travels in the context (WithProvider, set by pkg/app on the process's base
//     context) rather than in the global otel state, so several stacks in one test process each have
//     their own, and a test can swap in an in-memory exporter. Start uses the provider of the span
//     already in the context when there is one, then the context's provider, then the global one.
//   - W3C Trace Context (traceparent, tracestate) is the only propagation format.
//   - Span names: "intake <route>" (server), "worker.turn" (consumer) with children "worker.claim",
//     "worker.agent" and "worker.publish <event>", and "gateway.deliver <event>" (one per event sent
//     to a client, child of the worker's publish span). The worker's children of an unsampled turn
//     span are not made at all (StartChild): under the parent-based sampler they could only be
//     unsampled too.
package telemetry
