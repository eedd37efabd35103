// Package app composes turnstile's roles into one process. Each role (broker, intake, worker,
// gateway) is a Component built from shared Deps; app starts them in order, serves their routes with
// /healthz, /readyz and /metrics on one HTTP port, and on SIGINT or SIGTERM drops readiness and stops
// them in reverse order within TURNSTILE_SHUTDOWN_TIMEOUT.
//
// The four single-role binaries and the all-in-one `turnstile` binary are all thin mains over Main;
// the end-to-end tests compose the same roles through Start.
//
// Each role's component is built first, then all are started in order as one lifecycle.Group: when
// one fails to start, the ones started before it and the failed one itself (which may have started
// parts of itself) are stopped before Start returns. /readyz lists the roles that are not ready
// and why (Readier).
//
// Every role embeds one Shell (StreamShell for the roles that hold long-lived streams, which are
// then Drainers) and adds only its own parts and shutdown hooks (ShellConfig): the shell starts
// the parts, says whether the role is ready, and stops once, within its context: drain, wait, stop
// the parts in reverse, close. A role that must start while Postgres is down takes its pool from
// Deps.PostgresOrLazy.
//
// Subcommands: a role contributes its own (Role.Commands; intake brings `apikey`), so this package
// knows no domain command. Decision: `migrate [status]` stays here, as infrastructure of the
// runner rather than of one role: the migrations are the schema of the whole platform, every
// binary applies them at start under TURNSTILE_MIGRATE=auto, and a deployment's one-shot migrate
// job must work with whichever binary it has. `-h`/`--help`/`help` and `version`/`--version` are
// answered before the configuration is read (version.go), so they work with none; every Deps'
// registry carries turnstile_build_info.
//
// Decision: the dependencies a role needs (Postgres pool, Redis client) are created lazily, once,
// and only if some role of the process asks for them, so `TURNSTILE_ROLES=broker` needs neither.
package app
