package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/turnstile-run/turnstile/loadtest/internal/fairness"
)

// runFairness is the fairness scenario (package fairness): tenant a's -noisy-turns at once over
// -noisy-sessions sessions beside -quiet-tenants tenants posting -quiet-rate turns a second each
// for -quiet-for, with the fair scheduler, without a, and with the arrival-order scheduler.
func runFairness(ctx context.Context, o options, log *slog.Logger) error {
	cfg, err := baseConfig(o)
	if err != nil {
		return err
	}
	// A quiet tenant's turn posted behind a's backlog would be refused once that backlog is older
	// than the admission limit; admission is not what this scenario measures, so unless the
	// environment sets it the limit is out of the way.
	if os.Getenv("TURNSTILE_MAX_BACKLOG_AGE") == "" {
		cfg.Intake.MaxBacklogAge = time.Hour
	}
	id := strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	cfg.DatabaseSchema, cfg.KeyPrefix, cfg.InstanceID = "lt_"+id, "lt-"+id, "lt-"+id
	turnMs := o.durationMs
	if turnMs == 0 {
		turnMs = 1000
	}
	fmt.Fprintf(os.Stderr, "fairness: in-process stacks of %d partitions, max in-flight %d; tenant %s posts %d turns over %d sessions, %d tenants post %.1f/s each for %v; turns take %d ms\n",
		cfg.Partitions, cfg.MaxInflight, fairness.NoisyTenant, o.noisyTurns, o.noisySessions, o.quietTenants, o.quietRate, o.quietFor, turnMs)
	start := time.Now()
	rep, err := fairness.Run(ctx, fairness.Config{
		Base: cfg, Log: log,
		NoisyTurns: o.noisyTurns, NoisySessions: o.noisySessions, Posters: 64,
		QuietTenants: o.quietTenants, QuietSessions: 8, QuietRate: o.quietRate, QuietFor: o.quietFor,
		TurnMs: turnMs, DrainMax: o.drainMax, P99Margin: time.Second, Fraction: 0.95,
		Progress: func(s string) {
			if !o.quiet {
				fmt.Fprintf(os.Stderr, "%6.0fs %s\n", time.Since(start).Seconds(), s)
			}
		},
	})
	if err != nil {
		return err
	}
	b, _ := json.MarshalIndent(rep, "", "  ")
	if err := os.MkdirAll(o.out, 0o755); err != nil { //nolint:gosec // reports are meant to be read by anyone on the machine
		return err
	}
	file := filepath.Join(o.out, "fairness.json")
	if err := os.WriteFile(file, b, 0o644); err != nil { //nolint:gosec // reports are meant to be read by anyone on the machine
		return err
	}
	summariseFairness(rep, file, time.Since(start))
	if !rep.Met() {
		return fmt.Errorf("fairness targets not met: see %s", file)
	}
	return nil
}

func summariseFairness(r fairness.Report, file string, took time.Duration) {
	fmt.Printf("\nfairness: the quiet tenants (%d, %.1f turns/s each) beside tenant %s's %d turns over %d sessions, in %.0fs\n",
		r.Config.QuietTenants, r.Config.QuietRate, fairness.NoisyTenant, r.Config.NoisyTurns, r.Config.NoisySessions, took.Seconds())
	fmt.Println("  run      scheduler  quiet accept→start p50 / p99 (ms)   a's accept→start p50 / p99 (ms)  turns/s   in the window: quiet/s  a/s  quiet running  a running")
	for _, p := range []fairness.Pass{r.Fair, r.Alone, r.Arrival} {
		noisy := "           —"
		if p.Noisy {
			noisy = fmt.Sprintf("%9.0f / %-9.0f", p.NoisyWait.P50Ms, p.NoisyWait.P99Ms)
		}
		fmt.Printf("  %-8s %-9s  %12.0f / %-12.0f (n=%d)  %-30s  %7.1f   %21.1f  %4.1f  %13.1f  %9.1f\n",
			p.Name, p.Scheduler, p.Quiet.P50Ms, p.Quiet.P99Ms, p.Quiet.N, noisy, p.TurnsPerSec, p.QuietStartsPerSec, p.NoisyStartsPerSec, p.QuietRunning, p.NoisyRunning)
	}
	fmt.Printf("  quiet p99 beside a, fairly scheduled: %.0f ms; target ≤ alone p99 + %.0f ms = %.0f ms: met %v\n", r.Fair.Quiet.P99Ms, r.Config.P99MarginMs, r.P99LimitMs, r.P99Met)
	fmt.Printf("  turns/s fair %.1f vs arrival order %.1f: %.3f; target ≥ %.2f: met %v\n", r.Fair.TurnsPerSec, r.Arrival.TurnsPerSec, r.ThroughputRatio, r.Config.Fraction, r.ThroughputMet)
	fmt.Printf("  a's turns running while the others post %.1f of the %.1f slots they left (arrival order's busy slots less theirs): %.3f; target ≥ %.2f: met %v\n", r.Fair.NoisyRunning, r.LeftRunning, r.NoisyShareRatio, r.Config.Fraction, r.NoisyShareMet)
	for _, n := range r.Notes {
		fmt.Println("note:", n)
	}
	fmt.Println("wrote", file)
}
