// Package backlog computes turnstile's scale signal, turnstile_backlog_age_seconds: the age of the
// oldest accepted turn that could start now but has not.
//
// A turn counts when it is queued (intake recorded it, no worker claimed it) or running under an
// expired lease (its worker died; the turn waits for a takeover), its deadline has not passed, its
// cancel was not requested, and its session has no running turn with a live lease. A turn past its
// deadline or cancelled cannot start (intake's re-driver ends it), so it would only hold the signal
// up: one such turn, left queued by a lost record, made intake refuse every turn. Running turns are not backlog, and a turn waiting behind its own session's
// running turn is not backlog either: more workers cannot start it. A queued turn behind an earlier
// queued turn of its session is never the oldest, so the minimum needs no check for it.
//
// Decisions:
//   - The signal is computed from Postgres, not from Kafka offsets: offset lag measures the oldest
//     uncommitted record, which counts running and session-blocked turns.
//   - The Monitor runs in the intake role, which does not scale to zero with the workers, so the
//     gauge keeps rising when no worker is alive and KEDA can scale workers up from zero.
//   - One query (pkg/turnstore's Store.BacklogAge) every TURNSTILE_BACKLOG_INTERVAL (default 1s),
//     two index probes thanks to the partial indexes of migration 00050; Age() reads the last result without touching Postgres, so intake's
//     admission control may call it on every request.
//   - When the query fails (Postgres down) the value holds and turnstile_backlog_query_failures_total
//     rises. Extrapolating instead would make admission control refuse every turn after a while,
//     against intake's static stability (it keeps accepting while Postgres is down); the failure
//     counter, not the gauge, is what alerts on the outage.
//   - Ages are measured on Postgres's clock against accepted_at (intake's clock); a negative
//     difference from skew reads as 0.
package backlog
