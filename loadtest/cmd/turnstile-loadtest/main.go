// Command turnstile-loadtest drives load at a turnstile stack and checks what comes back.
//
// Scenarios:
//
//	steady  open-loop Poisson arrivals at -rate for -duration
//	burst   calibrate the workers' capacity μ, rehearse at 2μ to measure capacity under the
//	        burst's own load, run normal load at μ/2, then 2μ for -burst (60s), then normal until
//	        the backlog drains; checks the peak backlog and the drain time against Little's law
//	        (within 15%)
//	soak    steady load for a long -duration (default 10m)
//	inflight  one worker process holding -turns (10,000) turns at once, each 30s of tokens from
//	        the openai adapter against a fake model in another process; memory per held turn,
//	        CPU per token, renewal statements per heartbeat, Redis round trips per token and token
//	        delivery p99 beside the XADD→XREAD floor of the same run
//	latency POST → turn.started and → first delta at a waiting SSE reader for an agent that answers
//	        at once, at 10%, 50% and 90% of the capacity measured first, each beside the floor
//	        (produce → fetch → XADD → XREAD through the same broker and Redis) for -level
//	fairness  tenant a posts -noisy-turns (20,000) at once over -noisy-sessions (1,000) while
//	        -quiet-tenants (10) tenants post -quiet-rate (2) turns a second each, the agent's turns
//	        taking -turn-ms (1 s): the quiet tenants' accept→start p50/p99 with the fair scheduler,
//	        with a absent and with the arrival-order scheduler, turns a second, and a's share of
//	        what the others leave, each beside its target (package fairness)
//	peer    the same no-op work through turnstile, through River and through the floor (the
//	        least a pipeline of turnstile's shape does, on the raw clients), as ratios
//
// Without -url it starts every role in this process (embedded broker, fresh schema and key prefix,
// removed afterwards); with -url it targets a running stack, and -database-url/-database-schema
// enable the Postgres cross-check. Every run writes a JSON report and PNG plots to -out.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof" //nolint:gosec // served only when -pprof names an address, for profiling the in-process stack
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/schollz/progressbar/v3"

	"github.com/turnstile-run/turnstile/loadtest/internal/fdlimit"
	"github.com/turnstile-run/turnstile/loadtest/internal/gen"
	"github.com/turnstile-run/turnstile/loadtest/internal/peer"
	"github.com/turnstile-run/turnstile/loadtest/internal/report"
	"github.com/turnstile-run/turnstile/loadtest/internal/stack"
	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/demo"
	"github.com/turnstile-run/turnstile/pkg/postgres"
)

type options struct {
	scenario, url, gatewayURL, metricsURL, dbURL, dbSchema, out    string
	pprof, serveChat, chatCert, turnstileBin, workerPprof          string
	plotGateway                                                    string
	plainModel                                                     bool
	turns, turnTokens                                              int
	tokenInterval, ramp, level, loadFor                            time.Duration
	rate                                                           float64
	duration, calibrate, rehearse, normal, burst, drainMax         time.Duration
	calibrateRate                                                  float64
	calibrateAttempts                                              int
	tokens, durationMs, window, perSession, jobs, sessions, rounds int
	keep, quiet, recordQueued                                      bool
	noisyTurns, noisySessions, quietTenants                        int
	quietRate                                                      float64
	quietFor                                                       time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.scenario, "scenario", "steady", "steady, burst, soak, peer, inflight, latency or fairness")
	flag.StringVar(&o.url, "url", "", "intake base URL of a running stack; empty starts one in process")
	flag.StringVar(&o.gatewayURL, "gateway-url", "", "gateway base URL (default: -url)")
	flag.StringVar(&o.metricsURL, "metrics-url", "", "comma list of /metrics URLs to scrape for backlog age (default: -url/metrics)")
	flag.StringVar(&o.dbURL, "database-url", "", "Postgres of a running stack, for the cross-check (default: none with -url)")
	flag.StringVar(&o.dbSchema, "database-schema", "", "schema of a running stack's tables")
	flag.StringVar(&o.out, "out", "loadtest-out", "directory for the JSON report and PNG plots")
	flag.Float64Var(&o.rate, "rate", 50, "arrivals per second (steady, soak)")
	flag.DurationVar(&o.duration, "duration", 0, "arrival time (steady default 30s, soak default 10m)")
	flag.DurationVar(&o.calibrate, "calibrate", 15*time.Second, "burst: saturation phase that measures capacity")
	flag.Float64Var(&o.calibrateRate, "calibrate-rate", 600, "burst: arrivals per second while calibrating; doubled (twice at most) while the workers keep up with it")
	flag.IntVar(&o.calibrateAttempts, "calibrate-attempts", defaultCalibrateAttempts, "burst, latency: calibrations at most, the rate doubled after each the workers kept up with")
	flag.DurationVar(&o.rehearse, "rehearse", 15*time.Second, "burst: rehearsal at the burst rate that measures capacity under the burst's own load (0 skips it: naive prediction only)")
	flag.DurationVar(&o.normal, "normal", 20*time.Second, "burst: normal load before the burst")
	flag.DurationVar(&o.burst, "burst", 60*time.Second, "burst: length of the burst")
	flag.DurationVar(&o.level, "level", 20*time.Second, "latency: arrival time of each load level")
	flag.DurationVar(&o.drainMax, "drain-max", 5*time.Minute, "longest wait for the backlog to drain")
	flag.IntVar(&o.tokens, "tokens", 3, "demo agent: words per turn")
	flag.IntVar(&o.durationMs, "turn-ms", 0, "demo agent: spread each turn's words over this many ms (fairness: default 1000)")
	flag.IntVar(&o.window, "window", 64, "sessions receiving turns at once")
	flag.IntVar(&o.perSession, "turns-per-session", 4, "turns per session")
	flag.IntVar(&o.jobs, "jobs", 5000, "peer: no-op jobs per system")
	flag.IntVar(&o.sessions, "sessions", 0, "peer: sessions to spread turnstile's turns over (default: one per job)")
	flag.IntVar(&o.rounds, "rounds", 1, "peer: comparisons to run one after another; with more than one, peer.json holds each round and the medians")
	flag.DurationVar(&o.loadFor, "load-for", 15*time.Second, "peer: then turnstile at 25% and 50% of the capacity its drain measured, each for this long, beside Postgres's CPU (0 skips it)")
	flag.BoolVar(&o.recordQueued, "record-queued", false, "peer: also record turnstile's turns in Postgres as intake does (queued rows, session owners) before the drain, so claims take over existing rows as in production")
	flag.BoolVar(&o.keep, "keep", false, "keep the in-process stack's schema and keys")
	flag.BoolVar(&o.quiet, "quiet", false, "no progress bar")
	flag.StringVar(&o.pprof, "pprof", "", "serve net/http/pprof on this address (e.g. 127.0.0.1:6060) to profile the generator and the in-process stack")
	flag.IntVar(&o.turns, "turns", 10000, "inflight: turns held at once, one per session")
	flag.IntVar(&o.turnTokens, "turn-tokens", 150, "inflight: tokens the fake model streams per turn")
	flag.DurationVar(&o.tokenInterval, "token-interval", 200*time.Millisecond, "inflight: the fake model's pause before each token")
	flag.DurationVar(&o.ramp, "ramp", 20*time.Second, "inflight: time over which the turns are posted")
	flag.StringVar(&o.turnstileBin, "turnstile-bin", "", "inflight: the turnstile binary to run the front and the worker (default: turnstile beside this binary)")
	flag.StringVar(&o.serveChat, "serve-chat", "", "serve the inflight scenario's fake OpenAI-compatible model on this address and do nothing else")
	flag.StringVar(&o.chatCert, "chat-cert", "", "with -serve-chat: serve HTTPS (and HTTP/2) with a self-signed certificate written to this file")
	flag.StringVar(&o.workerPprof, "worker-pprof", "", "inflight: serve the worker process's net/http/pprof on this address (TURNSTILE_PPROF_ADDR of the worker alone)")
	flag.StringVar(&o.plotGateway, "plot-gateway", "", "draw the gateway's memory per idle stream by streams open into -out from BenchmarkGatewayFanout outputs: a comma list of label=file (go test -bench output) and do nothing else")
	flag.IntVar(&o.noisyTurns, "noisy-turns", 20000, "fairness: turns tenant a posts at once")
	flag.IntVar(&o.noisySessions, "noisy-sessions", 1000, "fairness: sessions tenant a spreads its turns over")
	flag.IntVar(&o.quietTenants, "quiet-tenants", 10, "fairness: tenants (b, c, …) posting at -quiet-rate beside a")
	flag.Float64Var(&o.quietRate, "quiet-rate", 2, "fairness: turns a second each quiet tenant posts")
	flag.DurationVar(&o.quietFor, "quiet-for", 30*time.Second, "fairness: how long the quiet tenants post")
	flag.BoolVar(&o.plainModel, "plain-model", false, "inflight: the fake model answers plain HTTP/1.1 instead of HTTPS with HTTP/2")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := runProfiled(ctx, o)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "turnstile-loadtest:", err)
		os.Exit(1)
	}
}

func baseConfig(o options) (config.Config, error) {
	cfg, err := config.Load()
	if err != nil {
		return cfg, err
	}
	cfg.LogLevel = "warn"
	// The load generator measures the platform's capacity, not one tenant's quota: unless the
	// environment sets them, tenant quotas are lifted for the stack it starts.
	if os.Getenv("TURNSTILE_TENANT_RATE") == "" {
		cfg.Intake.TenantRate, cfg.Intake.TenantBurst = 1_000_000, 1_000_000
	}
	if os.Getenv("TURNSTILE_MAX_QUEUED_TURNS") == "" {
		cfg.Intake.MaxQueuedTurns = 100_000_000
	}
	// The burst scenario asks the queue to absorb the burst, so the stack it starts gets an
	// admission limit that fits it. By Little's law a burst at twice the capacity for T leaves its
	// last arrivals behind a backlog of about T's worth of work, so the oldest turn waits about T;
	// three times that leaves room for capacity the load generator takes on a shared machine. With
	// the default (2m) a 60s burst on such a machine can pass the limit, and intake then refuses
	// turns with 503 — correct admission control, but not the queue behaviour under test. Unless the
	// environment sets it.
	// The burst's backlog is a minute of the workers' capacity, followed over open streams that
	// must fit the open-file limit (see fitsOpenFiles); its figures are calibrated for the capacity
	// of one worker at 64 turns in flight, so the stack it starts keeps that unless the environment
	// sets it.
	if o.scenario == "burst" && os.Getenv("TURNSTILE_WORKER_MAX_INFLIGHT") == "" {
		cfg.MaxInflight = burstMaxInflight
	}
	// The latency scenario's agent answers at once: no pause before each word.
	if o.scenario == "latency" && os.Getenv("TURNSTILE_DEMO_DELAY") == "" {
		cfg.DemoDelay = 0
	}
	if o.scenario == "burst" && os.Getenv("TURNSTILE_MAX_BACKLOG_AGE") == "" {
		cfg.Intake.MaxBacklogAge = max(cfg.Intake.MaxBacklogAge, burstBacklogAgeLimit(o.burst))
	}
	return cfg, cfg.Validate()
}

// startLocal starts intake, a worker and the gateway in this process (baseConfig) on a fresh schema
// and key prefix, which its Stop removes unless -keep.
func startLocal(ctx context.Context, o options, log *slog.Logger) (*stack.Stack, error) {
	cfg, err := baseConfig(o)
	if err != nil {
		return nil, err
	}
	id := strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	cfg.DatabaseSchema, cfg.KeyPrefix, cfg.InstanceID = "lt_"+id, "lt-"+id, "lt-"+id
	return stack.Start(ctx, cfg, "intake,worker,gateway", log)
}

// runProfiled runs the scenario, serving net/http/pprof on -pprof meanwhile when it names an address.
func runProfiled(ctx context.Context, o options) error {
	if o.pprof == "" {
		return run(ctx, o)
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", o.pprof)
	if err != nil {
		return fmt.Errorf("-pprof: %w", err)
	}
	srv := &http.Server{Handler: http.DefaultServeMux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	err = run(ctx, o)
	_ = srv.Close()
	<-done
	return err
}

// burstMaxInflight is the in-flight limit of the burst scenario's worker.
const burstMaxInflight = 64

// burstBacklogAgeLimit is the admission limit the burst scenario gives the stack it starts.
func burstBacklogAgeLimit(burst time.Duration) time.Duration { return 3 * burst }

func run(ctx context.Context, o options) error {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	switch {
	case o.serveChat != "":
		return serveChat(ctx, o)
	case o.plotGateway != "":
		return plotGateway(o)
	case o.scenario == "inflight":
		return runInflight(ctx, o)
	case o.scenario == "latency":
		return runLatency(ctx, o, log)
	case o.scenario == "fairness":
		return runFairness(ctx, o, log)
	}
	if o.scenario == "peer" {
		cfg, err := baseConfig(o)
		if err != nil {
			return err
		}
		po := peer.Options{Jobs: o.jobs, Sessions: o.sessions, RecordQueued: o.recordQueued, Base: cfg, Log: log}
		var report any
		var drain peer.Result
		if o.rounds == 1 {
			c, err := peer.Run(ctx, po)
			if err != nil {
				return err
			}
			report, drain = c, c.Turnstile
		} else {
			s, err := peer.RunRounds(ctx, po, o.rounds)
			if err != nil {
				return err
			}
			m := s.Median
			fmt.Fprintf(os.Stderr, "medians of %d rounds: turnstile %.0f/s, River %.0f/s, floor %.0f/s; turnstile/River %.3f, turnstile/floor %.3f, floor/River %.3f\n",
				o.rounds, m.Turnstile.PerSec, m.River.PerSec, m.Floor.PerSec, m.TurnstileOverRiver, m.TurnstileOverFloor, m.FloorOverRiver)
			report, drain = s, s.MedianTurnstile()
		}
		b, _ := json.MarshalIndent(report, "", "  ")
		if err := os.MkdirAll(o.out, 0o755); err != nil { //nolint:gosec // reports are meant to be read by anyone on the machine
			return err
		}
		fmt.Println(string(b))
		if err := os.WriteFile(filepath.Join(o.out, "peer.json"), b, 0o644); err != nil { //nolint:gosec // reports are meant to be read by anyone on the machine
			return err
		}
		if o.loadFor <= 0 {
			return nil
		}
		return runPostgresLoads(ctx, o, po, drain)
	}

	// Every followed session holds a connection (two ends of it with the stack in process).
	openFiles, err := fdlimit.Raise()
	if err != nil {
		fmt.Fprintf(os.Stderr, "warning: %v\n", err)
	}
	var pool *pgxpool.Pool
	gc := gen.Config{
		IntakeURL: o.url, GatewayURL: o.gatewayURL, Window: o.window, TurnsPerSession: o.perSession,
		Knobs: demo.Knobs{Tokens: o.tokens, DurationMs: o.durationMs},
	}
	if o.url == "" {
		st, err := startLocal(ctx, o, log)
		if err != nil {
			return err
		}
		defer func() { _ = st.Stop(context.WithoutCancel(ctx), o.keep) }() // stop cleanly after Ctrl-C too
		cfg := st.Config
		gc.IntakeURL, gc.GatewayURL, pool = st.URL, st.URL, st.Pool
		fmt.Fprintf(os.Stderr, "in-process stack at %s (schema %s, %d partitions, max in-flight %d, demo delay %v, max backlog age %v)\n",
			st.URL, cfg.DatabaseSchema, cfg.Partitions, cfg.MaxInflight, cfg.DemoDelay, cfg.Intake.MaxBacklogAge)
	} else if o.dbURL != "" {
		p, err := postgres.NewPool(ctx, o.dbURL, postgres.Options{Schema: o.dbSchema})
		if err != nil {
			return err
		}
		defer p.Close()
		pool = p
	}
	if o.metricsURL != "" {
		gc.MetricsURLs = strings.Split(o.metricsURL, ",")
	} else {
		gc.MetricsURLs = []string{gc.IntakeURL + "/metrics"}
	}
	g := gen.New(gc)
	g.Start(ctx)
	bar := newBar(o, g)
	defer bar.stop()

	var burst *gen.Burst
	var drained bool
	switch o.scenario {
	case "steady", "soak":
		d := o.duration
		if d == 0 {
			d = map[string]time.Duration{"steady": 30 * time.Second, "soak": 10 * time.Minute}[o.scenario]
		}
		bar.phase("steady", d)
		g.Arrive(ctx, o.scenario, o.rate, d)
		g.CloseSessions()
		bar.phase("drain", o.drainMax)
		drained = g.WaitIdle(ctx, o.drainMax)
	case "burst":
		var err error
		burst, drained, err = runBurst(ctx, o, g, bar, openFiles)
		if err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown scenario %q", o.scenario)
	}
	bar.stop()
	rep, err := g.Finish(context.WithoutCancel(ctx), o.scenario, pool)
	if err != nil {
		rep.Notes = append(rep.Notes, "postgres cross-check failed: "+err.Error())
	}
	if !drained {
		rep.Notes = append(rep.Notes, fmt.Sprintf("not every accepted turn finished within -drain-max %v", o.drainMax))
	}
	if pool == nil {
		rep.Notes = append(rep.Notes, "no -database-url: the Postgres cross-check was skipped")
	}
	rep.Burst = burst
	files, err := report.Write(o.out, o.scenario, rep)
	if err != nil {
		return err
	}
	summarise(os.Stdout, rep, files)
	if !rep.Correctness.OK() {
		return fmt.Errorf("correctness check failed: see %s", files[0])
	}
	return nil
}

func runBurst(ctx context.Context, o options, g *gen.Generator, bar *bar, openFiles uint64) (*gen.Burst, bool, error) {
	mu, err := calibrate(ctx, o, g, bar)
	if err != nil {
		return nil, false, err
	}
	b := &gen.Burst{CapacityPerSec: mu, NormalRate: mu / 2, BurstRate: 2 * mu, BurstSeconds: o.burst.Seconds()}
	fmt.Fprintf(os.Stderr, "\nmeasured capacity %.1f turns/s: normal %.1f/s, burst %.1f/s for %v\n", mu, b.NormalRate, b.BurstRate, o.burst)
	if o.rehearse > 0 {
		if err := rehearse(ctx, o, g, bar, b); err != nil {
			return nil, false, err
		}
		fmt.Fprintf(os.Stderr, "\ncapacity at the burst rate %.1f turns/s, at the normal rate %.1f turns/s\n", b.BurstCapacityPerSec, b.NormalCapacityPerSec)
	}
	if err := fitsOpenFiles(o, b, openFiles); err != nil {
		return nil, false, err
	}
	n0 := g.Elapsed()
	bar.phase("normal", o.normal)
	g.Arrive(ctx, "normal", b.NormalRate, o.normal)
	b0 := g.Elapsed()
	base := g.Outstanding() // what normal load keeps outstanding
	bar.phase("burst", o.burst)
	g.Arrive(ctx, "burst", b.BurstRate, o.burst)
	b1 := g.Elapsed()
	// Back to normal until the backlog is gone (or drain-max), then a little more to see it stay.
	// Arrivals go on until the backlog is back to a second's worth of normal arrivals above what
	// the normal phase left outstanding, so the drain is measured under the load it is predicted
	// for, however long it takes.
	bar.phase("drain at normal load", o.drainMax)
	arriveUntilDrained(ctx, g, "after", b.NormalRate, base+int(b.NormalRate), b1+o.drainMax)
	g.Arrive(ctx, "after", b.NormalRate, 10*time.Second)
	g.CloseSessions()
	bar.phase("final drain", o.drainMax)
	drained := g.WaitIdle(ctx, o.drainMax)
	g.AnalyseBurst(b, n0, b0, b1)
	return b, drained, nil
}

// defaultCalibrateAttempts is how many calibrations calibrate runs at most unless
// -calibrate-attempts says otherwise, doubling the rate after each that the workers kept up with.
const defaultCalibrateAttempts = 3

// calibrate measures the workers' capacity μ with the generator idle (gen.Generator.Calibrate),
// starting at -calibrate-rate for -calibrate.
func calibrate(ctx context.Context, o options, g *gen.Generator, bar *bar) (float64, error) {
	c, err := g.Calibrate(ctx, o.calibrateRate, o.calibrate, o.drainMax, o.calibrateAttempts, bar.phase)
	if err != nil {
		return 0, err
	}
	if !c.Saturated {
		fmt.Fprintf(os.Stderr, "warning: calibration at %.0f turns/s left less than a second of arrivals outstanding; the workers may not have been saturated\n", c.Rate)
	}
	return c.PerSec, nil
}

// fitsOpenFiles fails a burst whose predicted peak backlog would hold more streams open than the
// process may have files open (fdlimit), before it starts: past the limit the generator's own
// streams and posts fail, and the report would count them as the stack's refusals. A second of
// posts at the burst rate is taken to be in flight at once.
func fitsOpenFiles(o options, b *gen.Burst, openFiles uint64) error {
	peak := b.PlannedPeak()
	posts, inProcess := int(b.BurstRate), o.url == ""
	err := fdlimit.Fits(fdlimit.Need(peak, o.perSession, o.window, posts, inProcess), openFiles)
	if err == nil {
		return nil
	}
	hint := "lower the capacity the burst scales to (TURNSTILE_WORKER_MAX_INFLIGHT, -burst)"
	if k, ok := fdlimit.TurnsPerSessionThatFits(peak, o.perSession, o.window, posts, inProcess, openFiles); ok {
		hint = fmt.Sprintf("spread it over fewer sessions (-turns-per-session %d fits), or %s", k, hint)
	}
	return fmt.Errorf("the burst's predicted backlog of %.0f turns, %d to a session, %w; or %s", peak, o.perSession, err, hint)
}

// rehearse measures the workers' capacity under the load generator's own load in each phase: it
// posts at the burst rate for -rehearse (the backlog grows throughout, so completions run at the
// capacity left beside that load), then at the normal rate until that backlog has drained (the
// capacity beside normal load), then waits for the stack to go idle.
func rehearse(ctx context.Context, o options, g *gen.Generator, bar *bar, b *gen.Burst) error {
	const warm = 2 * time.Second // the first seconds' completions still ramp up
	bar.phase("rehearse burst rate", o.rehearse)
	r0 := g.Elapsed()
	g.Arrive(ctx, "rehearse-burst", b.BurstRate, o.rehearse)
	r1 := g.Elapsed()
	b.BurstCapacityPerSec = g.CompletionRate(r0+warm, r1)
	bar.phase("rehearse normal rate", o.drainMax)
	// Normal arrivals until the rehearsal's backlog is gone (about backlog/(μ-λn)), at most
	// drain-max: capacity under a deep backlog can be well below the calibrated μ, which is what
	// the rehearsal is there to measure.
	backlog := g.Outstanding()
	drainedAt, ok := arriveUntilDrained(ctx, g, "rehearse-normal", b.NormalRate, int(b.NormalRate), r1+o.drainMax)
	if !ok {
		return fmt.Errorf("the rehearsal's backlog of %d turns did not drain under normal load within %v", backlog, o.drainMax)
	}
	// Completions while the backlog lasted, the edge second at each end left out.
	b.NormalCapacityPerSec = g.CompletionRate(r1+time.Second, drainedAt-time.Second)
	bar.phase("rehearse drain", o.drainMax)
	if !g.WaitIdle(ctx, o.drainMax) {
		return fmt.Errorf("rehearsal backlog did not drain within %v", o.drainMax)
	}
	return nil
}

// arriveUntilDrained posts at rate, a second at a time, until at most outstanding turns are
// unfinished or the generator's clock reaches end; it reports when the backlog got there, and
// whether it did.
func arriveUntilDrained(ctx context.Context, g *gen.Generator, phase string, rate float64, outstanding int, end time.Duration) (time.Duration, bool) {
	for g.Elapsed() < end && ctx.Err() == nil {
		g.Arrive(ctx, phase, rate, time.Second)
		if g.Outstanding() <= outstanding {
			return g.Elapsed(), true
		}
	}
	return 0, false
}

func summarise(w io.Writer, r gen.Report, files []string) {
	_, _ = fmt.Fprintf(w, "\n%s: sent %d, accepted %d, refused %v, completed %d in %.0fs\n", r.Scenario, r.Sent, r.Accepted, r.Refused, r.Completed, r.Seconds)
	_, _ = fmt.Fprintf(w, "intake latency    p50 %.1fms p90 %.1fms p99 %.1fms\n", r.IntakeLatency.P50, r.IntakeLatency.P90, r.IntakeLatency.P99)
	_, _ = fmt.Fprintf(w, "first event       p50 %.1fms p90 %.1fms p99 %.1fms\n", r.FirstEvent.P50, r.FirstEvent.P90, r.FirstEvent.P99)
	_, _ = fmt.Fprintf(w, "turn latency      p50 %.1fms p90 %.1fms p99 %.1fms\n", r.TurnLatency.P50, r.TurnLatency.P90, r.TurnLatency.P99)
	_, _ = fmt.Fprintf(w, "backlog age gauge present=%v max=%.2fs\n", r.BacklogAge.Present, r.BacklogAge.MaxSec)
	c := r.Correctness
	_, _ = fmt.Fprintf(w, "correctness ok=%v lost=%d lost_events=%d repeated=%d reordered=%d wrong=%d pg=%+v\n",
		c.OK(), c.LostTurns, c.LostEvents, c.Repeated, c.Reordered, c.WrongContent, c.Postgres)
	if b := r.Burst; b != nil {
		_, _ = fmt.Fprintf(w, "burst: capacity %.1f/s idle generator, %.1f/s at the burst rate, %.1f/s at the normal rate (during the burst's backlog %.1f/s)\n",
			b.CapacityPerSec, b.BurstCapacityPerSec, b.NormalCapacityPerSec, b.BacklogCapacityPerSec)
		_, _ = fmt.Fprintf(w, "burst: peak backlog %.0f vs predicted %.0f (x%.2f); drain %.0fs vs predicted %.0fs (x%.2f); within 15%%: %v\n",
			b.MeasuredPeak, b.PredictedPeak, b.PeakRatio, b.MeasuredDrainSec, b.PredictedDrainSec, b.DrainRatio, b.WithinFifteenPct)
		_, _ = fmt.Fprintf(w, "burst: naive prediction (idle-generator capacity for both phases): peak %.0f (x%.2f), drain %.0fs (x%.2f)\n",
			b.NaivePredictedPeak, b.NaivePeakRatio, b.NaivePredictedDrainSec, b.NaiveDrainRatio)
	}
	for _, n := range r.Notes {
		_, _ = fmt.Fprintln(w, "note:", n)
	}
	_, _ = fmt.Fprintln(w, "wrote", strings.Join(files, ", "))
}

type bar struct {
	pb    *progressbar.ProgressBar
	g     *gen.Generator
	name  atomic.Value // string
	done  chan struct{}
	ended chan struct{}
}

func newBar(o options, g *gen.Generator) *bar {
	b := &bar{g: g, done: make(chan struct{}), ended: make(chan struct{})}
	b.name.Store("")
	if o.quiet {
		close(b.ended)
		return b
	}
	b.pb = progressbar.NewOptions64(100, progressbar.OptionSetWriter(os.Stderr), progressbar.OptionSetWidth(20),
		progressbar.OptionThrottle(200*time.Millisecond), progressbar.OptionShowElapsedTimeOnFinish())
	go func() {
		defer close(b.ended)
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-b.done:
				return
			case <-t.C:
				c := g.Snapshot()
				age := "absent"
				if c.BacklogAge != nil {
					age = fmt.Sprintf("%.1fs", *c.BacklogAge)
				}
				b.pb.Describe(fmt.Sprintf("%-20s sent %d acc %d ref %d done %d out %d age %s", b.name.Load(), c.Arrivals, c.Accepted, c.Refused, c.Completed, c.Outstanding, age))
				_ = b.pb.Add(0)
			}
		}
	}()
	return b
}

// phase restarts the bar for a phase of at most d.
func (b *bar) phase(name string, d time.Duration) {
	b.name.Store(name)
	if b.pb == nil {
		return
	}
	b.pb.Reset()
	b.pb.ChangeMax64(int64(d / time.Second))
	start := time.Now()
	go func() {
		for b.name.Load() == name {
			select {
			case <-b.done:
				return
			case <-time.After(time.Second):
				_ = b.pb.Set64(int64(time.Since(start) / time.Second))
			}
		}
	}()
}

func (b *bar) stop() {
	select {
	case <-b.done:
	default:
		close(b.done)
	}
	<-b.ended
	if b.pb != nil {
		_ = b.pb.Finish()
	}
}

// runPostgresLoads measures turnstile's Postgres CPU at 25% and 50% of the capacity drain measured
// and at capacity (peer.Loads), prints them and writes them to -out/peer-postgres.json.
func runPostgresLoads(ctx context.Context, o options, po peer.Options, drain peer.Result) error {
	loads, err := peer.Loads(ctx, po, drain, o.loadFor)
	if err != nil {
		return err
	}
	fmt.Println("\nturnstile beside the Postgres server's CPU (the whole local server)")
	fmt.Println("  load   offered/s  turns/s  postgres cores  share of the machine  postgres µs/turn")
	for _, p := range loads {
		fmt.Printf("  %3.0f%%  %9.0f  %7.0f  %14.2f  %19.1f%%  %16.1f\n", 100*p.Fraction, p.Offered, p.TurnsPerSec, p.PostgresCores, 100*p.PostgresShare, p.PostgresPerTurn)
	}
	b, _ := json.MarshalIndent(loads, "", "  ")
	return os.WriteFile(filepath.Join(o.out, "peer-postgres.json"), b, 0o644) //nolint:gosec // reports are meant to be read by anyone on the machine
}
