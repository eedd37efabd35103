// Package fairness is the fairness load scenario: one noisy tenant posts a backlog of turns at
// once, spread over many sessions, and while that backlog is queued quiet tenants each post a
// steady trickle on their own sessions, against a whole in-process stack (intake and a worker,
// API keys per tenant). The quiet tenants start once intake has taken the burst: while it takes
// it, intake has most of the machine and every turn's accept→start waits for a core, whatever
// the worker's order (measured: on 2 busy cores, quiet p99 4.3 s with the fair scheduler while
// 20,000 turns were posted). It runs
// three times in one call, each on a fresh stack: with the worker's fair scheduler, with the
// quiet tenants alone (the noisy tenant absent), and with the arrival-order scheduler
// (TURNSTILE_WORKER_SCHEDULER=arrival), and reads every turn's accepted_at, started_at and
// finished_at back from Postgres.
//
// It reports the quiet tenants' accept→start p50/p99 in each run, the total turns a second of
// each run (every turn over the time from the first acceptance to the last finish), and the
// noisy tenant's starts a second while the quiet tenants post, and checks three properties
// (Report.Check):
//
//   - the quiet tenants' p99 with the noisy tenant, fairly scheduled, is within their p99 with it
//     absent plus a margin (1 s in the full scenario);
//   - the fair run's turns a second are at least a fraction (0.95) of the arrival-order run's;
//   - the noisy tenant gets what the quiet ones leave: its turns running on average while they
//     post are at least that fraction of the arrival-order run's turns running in its window
//     (every slot the worker keeps busy) less the quiet tenants' own.
//
// The smoke test runs a scaled-down version (in make test); the full one is
// `turnstile-loadtest -scenario fairness`.
package fairness
