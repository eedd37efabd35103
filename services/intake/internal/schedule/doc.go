// Package schedule is turnstile's scheduled turns: a schedule posts a turn on every tick of a
// cron expression (five fields, or six with seconds first, or a descriptor such as @hourly), in
// an IANA time zone, to one session or to a new session each tick, until its end time.
//
// Every intake replica runs a Scheduler (intake owns the accept path the ticks go through, and
// never scales to zero). Exactly one replica fires each tick: it claims the tick in Postgres by
// moving the schedule's next_fire_at from that tick to the next one in a conditional UPDATE that
// also inserts the tick's fire row (schedule_fires, keyed by schedule and tick). The turn is then
// posted through intake's own accept path (admission, quotas, idempotency, Kafka) with the
// idempotency key schedule:<id>:<tick>, and the fire is marked answered. A replica that dies
// between its claim and the answer leaves the fire pending; when the fire's lease
// (LeaseTTLDefault) runs out another replica takes it over (fenced by the fire's claim number)
// and posts the same body with the same key, which intake maps to the same turn. So a tick
// fires once, is late by at most the lease when its replica dies, and is missed only when it is
// older than MisfireGraceDefault by the time any replica comes to it (every replica down).
//
// The Store also serves the native /v1/schedules routes (services/intake/internal/api) and,
// through them, the LangGraph front door's crons.
package schedule
