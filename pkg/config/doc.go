// Package config is turnstile's one source of settings: every knob is a field of Config, read from a
// TURNSTILE_* environment variable, with a default that works for `make dev` against the local
// Postgres and Redis. A zero or missing variable means the default. Validate checks every bound in one
// table and reports all violations at once, so a misconfigured deployment fails at start with the
// whole list rather than one complaint per restart.
//
// The README's configuration table lists the same variables; a test keeps the two in step.
package config
