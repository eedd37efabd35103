// Package demo is turnstile's deterministic demo agent: it streams the words of a reply computed
// from the input alone (pkg/demo), with a small delay between words, so tests and load tests can
// predict every event. Its knobs (length, duration, a tool call, failing or panicking the first N
// attempts) come from the turn's metadata; see pkg/demo.
package demo
