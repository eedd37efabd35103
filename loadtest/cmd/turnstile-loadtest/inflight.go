package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"gonum.org/v1/plot/plotter"

	"github.com/turnstile-run/turnstile/loadtest/internal/fakechat"
	"github.com/turnstile-run/turnstile/loadtest/internal/fdlimit"
	"github.com/turnstile-run/turnstile/loadtest/internal/inflight"
	"github.com/turnstile-run/turnstile/loadtest/internal/report"
	"github.com/turnstile-run/turnstile/loadtest/internal/stack"
	"github.com/turnstile-run/turnstile/pkg/app"
)

// serveChat is the -serve-chat mode: the fake OpenAI-compatible model of the inflight scenario,
// in a process of its own. It prints "listening <addr>" once it listens.
func serveChat(ctx context.Context, o options) error {
	if _, err := fdlimit.Raise(); err != nil {
		fmt.Fprintf(os.Stderr, "warning: %v\n", err)
	}
	s := &fakechat.Server{Interval: o.tokenInterval, Tokens: o.turnTokens}
	return fakechat.Serve(ctx, o.serveChat, o.chatCert, s, func(addr string) { fmt.Printf("listening %s\n", addr) })
}

// runInflight is the inflight scenario: three child processes — the fake model (this binary with
// -serve-chat), the front (turnstile: broker, intake, gateway) and the one worker measured
// (turnstile: worker, openai adapter) — with the generator in this process. Separate processes
// keep each within the open-file limit (a held turn is a socket at both ends of each hop) and keep
// the worker's memory and CPU its own.
func runInflight(ctx context.Context, o options) error {
	if _, err := fdlimit.Raise(); err != nil { // the children inherit it
		fmt.Fprintf(os.Stderr, "warning: %v\n", err)
	}
	bin := o.turnstileBin
	if bin == "" {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		bin = filepath.Join(filepath.Dir(self), "turnstile")
	}
	cfg, err := baseConfig(o)
	if err != nil {
		return err
	}
	id := strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	cfg.DatabaseSchema, cfg.KeyPrefix = "lt_"+id, "lt-"+id
	defer func() { _ = stack.Cleanup(context.WithoutCancel(ctx), cfg) }()

	self, err := os.Executable()
	if err != nil {
		return err
	}
	args := []string{"-serve-chat", "127.0.0.1:0", "-turn-tokens", strconv.Itoa(o.turnTokens), "-token-interval", o.tokenInterval.String()}
	scheme, certEnv := "http", []string{}
	if !o.plainModel {
		// HTTPS with HTTP/2, as hosted models answer; the worker trusts the model's certificate
		// (SSL_CERT_FILE) and nothing else, which it does not need here.
		dir, err := os.MkdirTemp("", "turnstile-inflight-")
		if err != nil {
			return err
		}
		defer func() { _ = os.RemoveAll(dir) }()
		cert := filepath.Join(dir, "model.pem")
		args = append(args, "-chat-cert", cert)
		scheme, certEnv = "https", []string{"SSL_CERT_FILE=" + cert}
	}
	chat, chatAddr, err := startChild(ctx, "model", exec.Command(self, args...)) //nolint:gosec // this binary, re-run as the fake model
	if err != nil {
		return err
	}
	defer chat.stop()

	ports, err := freePorts(ctx, 3)
	if err != nil {
		return err
	}
	brokerAddr, frontAddr, workerAddr := ports[0], ports[1], ports[2]
	common := []string{
		"TURNSTILE_DATABASE_SCHEMA=" + cfg.DatabaseSchema, "TURNSTILE_KEY_PREFIX=" + cfg.KeyPrefix,
		"TURNSTILE_LOG_LEVEL=warn", "TURNSTILE_KAFKA_BROKERS=" + brokerAddr,
	}
	front := exec.Command(bin) //nolint:gosec // the turnstile binary beside this one, or -turnstile-bin
	front.Env = append(append(os.Environ(), common...), "TURNSTILE_ROLES=broker,intake,gateway",
		"TURNSTILE_BROKER_ADDR="+brokerAddr, "TURNSTILE_HTTP_ADDR="+frontAddr,
		orDefault("TURNSTILE_TENANT_RATE", "1000000"), orDefault("TURNSTILE_TENANT_BURST", "1000000"),
		orDefault("TURNSTILE_MAX_QUEUED_TURNS", "100000000"))
	fp, err := startService(ctx, "front", front, frontAddr)
	if err != nil {
		return err
	}
	defer fp.stop()
	n := strconv.Itoa(o.turns)
	worker := exec.Command(bin) //nolint:gosec // as above
	worker.Env = append(append(append(os.Environ(), common...), certEnv...), "TURNSTILE_ROLES=worker", "TURNSTILE_HTTP_ADDR="+workerAddr,
		"TURNSTILE_AGENT=openai", "TURNSTILE_OPENAI_BASE_URL="+scheme+"://"+chatAddr+"/v1", "TURNSTILE_OPENAI_MODEL=fake",
		orDefault("TURNSTILE_WORKER_MAX_INFLIGHT", n), orDefault("TURNSTILE_UPSTREAM_TOTAL_LIMIT", n),
		orDefault("TURNSTILE_UPSTREAM_INITIAL_LIMIT", n), orDefault("TURNSTILE_UPSTREAM_MAX_LIMIT", n))
	if o.workerPprof != "" {
		worker.Env = append(worker.Env, "TURNSTILE_PPROF_ADDR="+o.workerPprof)
	}
	wp, err := startService(ctx, "worker", worker, workerAddr)
	if err != nil {
		return err
	}
	defer wp.stop()

	rdb, err := app.NewRedis(cfg)
	if err != nil {
		return err
	}
	defer func() { _ = rdb.Close() }()
	fmt.Fprintf(os.Stderr, "inflight: %d turns of %d tokens every %v; front %s, worker %s, model %s://%s (schema %s)\n",
		o.turns, o.turnTokens, o.tokenInterval, frontAddr, workerAddr, scheme, chatAddr, cfg.DatabaseSchema)
	res, err := inflight.Run(ctx, inflight.Config{
		IntakeURL: "http://" + frontAddr, WorkerMetricsURL: "http://" + workerAddr + "/metrics",
		Redis: rdb, FloorKey: cfg.KeyPrefix + ":floor", Turns: o.turns, Tokens: o.turnTokens,
		Interval: o.tokenInterval, Ramp: o.ramp, Heartbeat: cfg.Heartbeat,
		Processes: map[string]int{"front": fp.cmd.Process.Pid, "model": chat.cmd.Process.Pid, "worker": wp.cmd.Process.Pid},
		Progress: func(done, held int) {
			if !o.quiet {
				fmt.Fprintf(os.Stderr, "\r%d done, %d held by the worker   ", done, held)
			}
		},
	})
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr)
	files, err := writeInflight(o.out, res)
	if err != nil {
		return err
	}
	printInflight(res, files)
	if !res.OK() {
		return fmt.Errorf("inflight: %d of %d turns complete and in order; problems: %v", res.Completed, res.Turns, res.Problems)
	}
	return nil
}

// loadAverage is the machine's 1-, 5- and 15-minute load averages, or "?" if unreadable.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "?"
}

func orDefault(name, value string) string {
	if v := os.Getenv(name); v != "" {
		return name + "=" + v
	}
	return name + "=" + value
}

func writeInflight(dir string, r *inflight.Result) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil { //nolint:gosec // reports are meant to be read by anyone on the machine
		return nil, err
	}
	b, _ := json.MarshalIndent(r, "", "  ")
	jf := filepath.Join(dir, "inflight.json")
	if err := os.WriteFile(jf, b, 0o644); err != nil { //nolint:gosec // reports are meant to be read by anyone on the machine
		return nil, err
	}
	var held, streaming, heap, stacks plotter.XYs
	for _, s := range r.Timeline {
		held = append(held, plotter.XY{X: s.T, Y: s.Inflight})
		streaming = append(streaming, plotter.XY{X: s.T, Y: float64(s.Streaming)})
		heap = append(heap, plotter.XY{X: s.T, Y: s.HeapBytes / (1 << 20)})
		stacks = append(stacks, plotter.XY{X: s.T, Y: s.StackBytes / (1 << 20)})
	}
	f1, err := report.Line(dir, "inflight-turns.png", "turns held by one worker", "turns",
		report.Series{Name: "in flight (worker gauge)", Points: held}, report.Series{Name: "streaming (seen by browsers)", Points: streaming})
	if err != nil {
		return nil, err
	}
	f2, err := report.Line(dir, "inflight-memory.png", "worker memory while holding them", "MiB",
		report.Series{Name: "heap in use", Points: heap}, report.Series{Name: "goroutine stacks", Points: stacks})
	if err != nil {
		return nil, err
	}
	return []string{jf, f1, f2}, nil
}

func printInflight(r *inflight.Result, files []string) {
	ok := map[bool]string{true: "met", false: "NOT met"}
	perTurn := r.HeapPerTurn + r.StackPerTurn
	fmt.Printf("inflight: %d/%d turns complete, %d tokens in order; peak held %.0f\n", r.Completed, r.Turns, r.Delivered, r.PeakHeld)
	fmt.Printf("  memory per held turn   %.1f KiB (heap %.1f + stacks %.1f; %.2f goroutines)   target 32 KiB: %s\n",
		perTurn/1024, r.HeapPerTurn/1024, r.StackPerTurn/1024, r.GoroutinesPerTurn, ok[perTurn <= 32<<10])
	fmt.Printf("  CPU per token          %v (worker process)\n", r.CPUPerToken)
	// A window of h heartbeat intervals holds at most ⌊h⌋+1 renewal rounds at one per heartbeat:
	// the samples are stamped when their scrape is sent, not when the worker reads its counter,
	// so either end of the window may be off by a scrape's latency and catch one more round.
	fmt.Printf("  renewal statements     %.0f in %.1f heartbeats (%.2f per heartbeat, %.0f leases each)   target 1 per heartbeat: %s\n",
		r.RenewalStatements, r.RenewalHeartbeats, r.RenewalsPerHeartbeat, r.LeasesPerStatement,
		ok[r.RenewalStatements > 0 && r.RenewalStatements <= math.Floor(r.RenewalHeartbeats)+1])
	fmt.Printf("  Redis round trips      %.3f per token (worker publish pipelines)\n", r.PublishesPerToken)
	fmt.Printf("  token delivery         p50 %.2f ms, p99 %.2f ms   floor XADD→XREAD p50 %.2f ms, p99 %.2f ms   p99 +%.2f ms (target ≤ 10): %s\n",
		r.Delivery.P50, r.Delivery.P99, r.Floor.P50, r.Floor.P99, r.Delivery.P99-r.Floor.P99, ok[r.Delivery.P99-r.Floor.P99 <= 10])
	fmt.Printf("  POST→202               p50 %.1f ms, p99 %.1f ms; 202→first token p50 %.1f ms, p99 %.1f ms (the model's first pause is %v)\n",
		r.Post.P50, r.Post.P99, r.FirstToken.P50, r.FirstToken.P99, r.Interval)
	cores := r.CoresUsed()
	fmt.Printf("  cores used on average  worker %.2f, front (broker, intake, gateway) %.2f, model %.2f, generator %.2f\n",
		cores["worker"], cores["front"], cores["model"], cores["generator"])
	// Threads waiting for a core on average: above zero, a process was ready to work and the
	// machine's other work (or the run's other processes) held the cores.
	wait := r.RunQueueWait()
	fmt.Printf("  run-queue wait         worker %.2f, front %.2f, model %.2f, generator %.2f threads waiting for a core on average (load average %s)\n",
		wait["worker"], wait["front"], wait["model"], wait["generator"], loadAverage())
	fmt.Printf("  report: %s\n", strings.Join(files, ", "))
}

// freePorts returns n loopback addresses free a moment ago, for the children to listen on.
func freePorts(ctx context.Context, n int) ([]string, error) {
	var out []string
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, l)
		out = append(out, l.Addr().String())
	}
	return out, nil
}

// child is a process the scenario started; stop ends it (SIGTERM, then SIGKILL after 30s).
type child struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited; err is then how
	err  error
}

func (c *child) stop() {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(30 * time.Second)
	defer t.Stop()
	select {
	case <-c.done:
	case <-t.C:
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

func start(name string, cmd *exec.Cmd) (*child, error) {
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

// startChild starts a child that prints "listening <addr>" and returns that address.
func startChild(ctx context.Context, name string, cmd *exec.Cmd) (*child, string, error) {
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	c, err := start(name, cmd)
	if err != nil {
		return nil, "", err
	}
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
	}()
	t := time.NewTimer(30 * time.Second)
	defer t.Stop()
	select {
	case l := <-line:
		if addr, ok := strings.CutPrefix(l, "listening "); ok {
			return c, addr, nil
		}
		c.stop()
		return nil, "", fmt.Errorf("%s: unexpected first line %q", name, l)
	case <-t.C:
	case <-ctx.Done():
	}
	c.stop()
	return nil, "", fmt.Errorf("%s did not start listening", name)
}

// startService starts a turnstile process and waits until its /readyz answers 200.
func startService(ctx context.Context, name string, cmd *exec.Cmd, addr string) (*child, error) {
	c, err := start(name, cmd)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(2 * time.Minute)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(deadline) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/readyz", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return c, nil
			}
		}
		select {
		case <-c.done:
			return nil, fmt.Errorf("%s exited: %w", name, errors.Join(c.err, errors.New("see its log above")))
		case <-ctx.Done():
			c.stop()
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
	c.stop()
	return nil, fmt.Errorf("%s not ready within 2m", name)
}
