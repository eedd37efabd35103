package config

import (
	"errors"
	"time"
)

// Schedule defaults (services/intake/internal/schedule has the same).
const (
	SchedulesMaxDefault          = 1000
	SchedulerPollIntervalDefault = time.Second
	SchedulerLeaseTTLDefault     = 15 * time.Second
	SchedulerMisfireGraceDefault = time.Minute
)

// ScheduleSettings configure scheduled turns: every intake replica runs the scheduler, and each
// tick is claimed by one of them in Postgres. Each field documents its variable and default;
// applyDefaults fills zero fields and validate reports every bound violated.
type ScheduleSettings struct {
	// Max is the most schedules one tenant may have; POST /v1/schedules (or a LangGraph cron)
	// past it is answered 409 schedules-limit. Defaults to 1000.
	Max int `env:"TURNSTILE_SCHEDULES_MAX"`
	// PollInterval is the longest the scheduler sleeps between passes (it wakes at the next tick
	// it knows of sooner): a schedule created on another replica fires its first tick at most
	// this late. Defaults to 1s.
	PollInterval time.Duration `env:"TURNSTILE_SCHEDULER_POLL_INTERVAL"`
	// TickLease is how long the replica that claimed a tick may take to post it before another
	// replica takes the tick over and posts it (the same turn, by its idempotency key): the
	// longest a tick is late when its replica dies. Defaults to 15s.
	TickLease time.Duration `env:"TURNSTILE_SCHEDULER_LEASE_TTL"`
	// MisfireGrace is how late a tick may still be posted; older ticks (every replica was down,
	// or intake refused the turn for that long) are skipped and counted in
	// turnstile_schedule_ticks_missed_total. Defaults to 1m.
	MisfireGrace time.Duration `env:"TURNSTILE_SCHEDULER_MISFIRE_GRACE"`
}

func (s *ScheduleSettings) applyDefaults() {
	if s.Max == 0 {
		s.Max = SchedulesMaxDefault
	}
	if s.PollInterval == 0 {
		s.PollInterval = SchedulerPollIntervalDefault
	}
	if s.TickLease == 0 {
		s.TickLease = SchedulerLeaseTTLDefault
	}
	if s.MisfireGrace == 0 {
		s.MisfireGrace = SchedulerMisfireGraceDefault
	}
}

func (s ScheduleSettings) validate() []error {
	var errs []error
	if s.Max < 1 {
		errs = append(errs, errors.New("TURNSTILE_SCHEDULES_MAX: must be at least 1"))
	}
	if s.PollInterval < 10*time.Millisecond {
		errs = append(errs, errors.New("TURNSTILE_SCHEDULER_POLL_INTERVAL: must be at least 10ms"))
	}
	if s.TickLease < time.Second {
		errs = append(errs, errors.New("TURNSTILE_SCHEDULER_LEASE_TTL: must be at least 1s"))
	}
	if s.MisfireGrace < s.TickLease {
		errs = append(errs, errors.New("TURNSTILE_SCHEDULER_MISFIRE_GRACE: must be at least TURNSTILE_SCHEDULER_LEASE_TTL, or a tick whose replica died is given up rather than taken over"))
	}
	return errs
}
