// Package app composes turnstile's roles into one process. Each role (broker, intake, worker,
// gateway) is a Component built from shared Deps; app starts them in order, serves their routes with
// /healthz, /readyz and /metrics on one HTTP port, and on SIGINT or SIGTERM drops readiness and stops
// them in reverse order within TURNSTILE_SHUTDOWN_TIMEOUT.
//
// The four single-role binaries and the all-in-one `turnstile` binary are all thin mains over Main;
// the end-to-end tests compose the same roles through Start.
//
// Decision: the dependencies a role needs (Postgres pool, Redis client) are created lazily, once,
// and only if some role of the process asks for them, so `TURNSTILE_ROLES=broker` needs neither.
package app
