package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/turnstile-run/turnstile/loadtest/internal/fdlimit"
	"github.com/turnstile-run/turnstile/loadtest/internal/gen"
	"github.com/turnstile-run/turnstile/loadtest/internal/latency"
	"github.com/turnstile-run/turnstile/pkg/app"
	"github.com/turnstile-run/turnstile/pkg/demo"
)

// runLatency is the latency scenario on a stack in this process: the capacity, then each fraction
// of it for -level beside the floor (package latency).
func runLatency(ctx context.Context, o options, log *slog.Logger) error {
	if _, err := fdlimit.Raise(); err != nil {
		fmt.Fprintf(os.Stderr, "warning: %v\n", err)
	}
	st, err := startLocal(ctx, o, log)
	if err != nil {
		return err
	}
	defer func() { _ = st.Stop(context.WithoutCancel(ctx), o.keep) }()
	cfg := st.Config
	rdb, err := app.NewRedis(st.Config)
	if err != nil {
		return err
	}
	defer func() { _ = rdb.Close() }()
	fmt.Fprintf(os.Stderr, "latency: in-process stack at %s (schema %s, %d partitions, max in-flight %d, demo delay %v); %d words a turn\n",
		st.URL, cfg.DatabaseSchema, cfg.Partitions, cfg.MaxInflight, cfg.DemoDelay, o.tokens)
	g := gen.New(gen.Config{
		IntakeURL: st.URL, Window: o.window, TurnsPerSession: o.perSession,
		Knobs: demo.Knobs{Tokens: o.tokens}, MetricsURLs: []string{st.URL + "/metrics"},
	})
	g.Start(ctx)
	bar := newBar(o, g)
	defer bar.stop()
	rep, err := latency.Run(ctx, g, latency.Config{
		Level: o.level, CalibrateRate: o.calibrateRate, Calibrate: o.calibrate, CalibrateAttempts: o.calibrateAttempts, DrainMax: o.drainMax,
		Floor: latency.Floor{Brokers: st.Config.BrokerList(), Topic: cfg.Topic + "-floor", Redis: rdb, Key: cfg.KeyPrefix + ":floor"},
		Phase: bar.phase, MetricsURL: st.URL + "/metrics",
	})
	bar.stop()
	if err != nil {
		g.Stop()
		return err
	}
	gr, err := g.Finish(context.WithoutCancel(ctx), "latency", st.Pool)
	if err != nil {
		rep.Notes = append(rep.Notes, "postgres cross-check failed: "+err.Error())
	}
	if c := gr.Correctness; !c.OK() {
		rep.Notes = append(rep.Notes, fmt.Sprintf("correctness: %+v", c))
	}
	files, err := latency.Write(o.out, rep)
	if err != nil {
		return err
	}
	summariseLatency(rep, files)
	if !gr.Correctness.OK() {
		return fmt.Errorf("correctness check failed: %+v", gr.Correctness)
	}
	return nil
}

func summariseLatency(r latency.Report, files []string) {
	fmt.Printf("\nlatency: capacity %.1f turns/s (calibrated at %.0f/s, saturated %v)\n", r.Capacity.PerSec, r.Capacity.Rate, r.Capacity.Saturated)
	fmt.Println("  load  offered/s  timed  turn.started p50/p99  first delta p50/p99  floor p50/p99  added to turn.started p50/p99  added to first delta p50/p99 (ms)")
	for _, l := range r.Levels {
		fmt.Printf("  %3.0f%%  %9.1f  %5d  %8.1f / %-8.1f   %8.1f / %-8.1f  %5.1f / %-6.1f  %+13.1f / %-+13.1f  %+6.1f / %+6.1f\n",
			100*l.Fraction, l.Rate, l.FirstDelta.N, l.Started.P50, l.Started.P99, l.FirstDelta.P50, l.FirstDelta.P99,
			l.Floor.P50, l.Floor.P99, l.AddedStartedP50, l.AddedStartedP99, l.AddedP50, l.AddedP99)
		if len(l.StageMeanMs) > 0 {
			var parts []string
			for _, name := range latency.Stages() {
				if ms, ok := l.StageMeanMs[name]; ok {
					parts = append(parts, fmt.Sprintf("%s %.2f ms", name, ms))
				}
			}
			fmt.Printf("        stages meanwhile, mean: %s\n", strings.Join(parts, ", "))
		}
	}
	fmt.Printf("  target at %.0f%%: added ≤ %.0f ms p50 and ≤ %.0f ms p99: met %v\n", 100*latency.TargetFraction, latency.TargetAddedP50Ms, latency.TargetAddedP99Ms, r.Met)
	for _, n := range r.Notes {
		fmt.Println("note:", n)
	}
	fmt.Println("wrote", files)
}
