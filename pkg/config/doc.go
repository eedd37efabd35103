// Package config is turnstile's one source of settings: every knob is a field of Config, read from a
// TURNSTILE_* environment variable, with a default that works for `make dev` against the local
// Postgres and Redis. A zero or missing variable means the default. Validate checks every bound in one
// table and reports all violations at once, so a misconfigured deployment fails at start with the
// whole list rather than one complaint per restart.
//
// docs/CONFIGURATION.md, the operator's reference, is generated from the comments of these
// fields (`make docs`, or go generate in this directory; see internal/configdoc for the
// conventions the comments follow), and a test fails when it is stale or a field is undocumented.
//
// # Where defaults live
//
// Every default is spelled once, as a documented exported …Default constant, and everything else
// names that constant. Which package owns it follows the import graph (pkg/config is imported by
// the services, so it cannot import their internal packages):
//   - A leaf package of pkg/ that a setting configures (streamtoken, telemetry) takes its own
//     options, never imports pkg/config, and owns the default; pkg/config refers to it
//     (StreamTokenTTLDefault is streamtoken.TTLDefault) or, when the default is a rule rather
//     than a value, leaves the field zero for the package to fill (TraceSampleRatio).
//   - A component inside a service that takes an operator setting (a TURNSTILE_* variable) fills
//     a zero field from this package's constant (retention's Interval and Batch from
//     RetentionIntervalDefault and RetentionBatchDefault, record's interval from
//     QueueFlushIntervalDefault, the gateway's sse.Config and intake's api.Config from the
//     gateway and intake constants): the variable's default is part of the operator's contract,
//     which Default, Validate and docs/CONFIGURATION.md show here.
//   - A knob no variable sets (vacuum's thresholds, history's page size, batch's sizes, intake's
//     store timeouts and page sizes) has its default only in its component's package, as that
//     package's documented constant; this package does not spell it.
package config

//go:generate go run ./internal/gendoc -config . -out ../../docs/CONFIGURATION.md
