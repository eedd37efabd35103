package inflight

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/turnstile-run/turnstile/loadtest/internal/fakechat"
	"github.com/turnstile-run/turnstile/loadtest/internal/scrape"
	"github.com/turnstile-run/turnstile/pkg/sse"
)

// Defaults of Config.
const (
	TurnsDefault     = 10000
	TokensDefault    = 150
	IntervalDefault  = 200 * time.Millisecond
	RampDefault      = 20 * time.Second
	HeartbeatDefault = 3 * time.Second
)

// Config tunes Run. Zero values mean the documented defaults.
type Config struct {
	// IntakeURL is the base URL of intake; GatewayURL of the gateway (defaults to IntakeURL).
	IntakeURL, GatewayURL string
	// WorkerMetricsURL is the /metrics of the one worker process measured.
	WorkerMetricsURL string
	// Redis is the stack's Redis, for the XADD→XREAD floor; FloorKey names the probe's stream
	// (deleted afterwards).
	Redis    redis.UniversalClient
	FloorKey string
	// Turns is how many turns run at once. Defaults to 10,000.
	Turns int
	// Tokens and Interval are the fake model's answer: Tokens tokens, one every Interval. They only
	// label the report and size the checks; the fakechat server must be started with the same.
	// Default 150 and 200ms (30s a turn).
	Tokens   int
	Interval time.Duration
	// Ramp spreads the posts. Defaults to 20s.
	Ramp time.Duration
	// Heartbeat is the worker's lease-renewal interval. Defaults to 3s.
	Heartbeat time.Duration
	// Timeout bounds the whole run. Defaults to Ramp + Tokens×Interval + 2m.
	Timeout time.Duration
	// Processes names other processes of the run (the front, the model) by PID; each sample reads
	// their CPU time from /proc, beside the generator's own, to show where the cores go.
	Processes map[string]int
	// Progress, when set, is called every second with the turns done and in flight.
	Progress func(done, inflight int)
}

func (c *Config) applyDefaults() {
	if c.GatewayURL == "" {
		c.GatewayURL = c.IntakeURL
	}
	if c.Turns == 0 {
		c.Turns = TurnsDefault
	}
	if c.Tokens == 0 {
		c.Tokens = TokensDefault
	}
	if c.Interval == 0 {
		c.Interval = IntervalDefault
	}
	if c.Ramp == 0 {
		c.Ramp = RampDefault
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = HeartbeatDefault
	}
	if c.FloorKey == "" {
		c.FloorKey = "inflight-floor-" + uuid.NewString()
	}
	if c.Timeout == 0 {
		c.Timeout = c.Ramp + time.Duration(c.Tokens)*c.Interval + 2*time.Minute
	}
}

// Sample is one second of the run, read from the worker's /metrics and the generator.
type Sample struct {
	T float64 `json:"t"`
	// Inflight is the worker's turnstile_worker_inflight_turns; Streaming the turns whose stream
	// has shown a token and no terminal event yet.
	Inflight  float64 `json:"inflight"`
	Streaming int     `json:"streaming"`
	HeapBytes float64 `json:"heap_inuse_bytes"`
	// StackBytes is go_memstats_stack_inuse_bytes: the goroutine stacks.
	StackBytes float64 `json:"stack_inuse_bytes"`
	Goroutines float64 `json:"goroutines"`
	CPUSeconds float64 `json:"cpu_seconds"`
	Renewals   float64 `json:"lease_renewal_rounds"`
	Publishes  float64 `json:"publish_pipelines"`
	Leases     float64 `json:"leases_renewed"`
	// The model's upstream guard: its adaptive limit, the calls it lets through and the turns
	// waiting for a slot.
	UpstreamLimit    float64 `json:"upstream_limit"`
	UpstreamInflight float64 `json:"upstream_inflight"`
	UpstreamWaiting  float64 `json:"upstream_waiting"`
	// ProcessCPU is the CPU seconds so far of Config.Processes and of the generator ("generator").
	ProcessCPU map[string]float64 `json:"process_cpu_seconds,omitempty"`
	// ProcessWait is the seconds so far that the same processes' threads were runnable but waited
	// for a CPU (/proc/<pid>/task/*/schedstat): on a machine shared with other work, the share of
	// the run a process spent queued for a core rather than working or idle.
	ProcessWait map[string]float64 `json:"process_runqueue_wait_seconds,omitempty"`
}

// Latency is a distribution summary in milliseconds.
type Latency struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`
}

// Result is the report of one run.
type Result struct {
	Turns     int           `json:"turns"`
	Tokens    int           `json:"tokens_per_turn"`
	Interval  time.Duration `json:"interval_ns"`
	Completed int           `json:"completed"`
	// Retried counts attempts that started a turn over after a takeover (a lease that expired
	// unrenewed): each streams the answer again from its first token.
	Retried int `json:"retried_attempts"`
	// PostRetries counts posts sent again after intake's 503 or 429 (backpressure).
	PostRetries int `json:"post_retries"`
	// MissedSamples counts metric scrapes that failed or timed out: a sample fewer on the
	// timeline, not a fault of the run.
	MissedSamples     int           `json:"missed_samples"`
	Delivered         int           `json:"tokens_delivered"`
	PeakHeld          float64       `json:"peak_inflight"`
	Idle              Sample        `json:"idle"`
	Plateau           Sample        `json:"plateau"`
	HeapPerTurn       float64       `json:"heap_bytes_per_turn"`
	StackPerTurn      float64       `json:"stack_bytes_per_turn"`
	GoroutinesPerTurn float64       `json:"goroutines_per_turn"`
	CPUPerToken       time.Duration `json:"cpu_per_token_ns"`
	// RenewalsPerHeartbeat is lease-renewal statements per heartbeat interval while at least 90% of
	// the peak was held: RenewalStatements statements over RenewalHeartbeats heartbeat intervals,
	// renewing LeasesPerStatement leases each on average.
	RenewalsPerHeartbeat float64 `json:"renewal_statements_per_heartbeat"`
	RenewalStatements    float64 `json:"renewal_statements"`
	RenewalHeartbeats    float64 `json:"renewal_heartbeats"`
	LeasesPerStatement   float64 `json:"leases_per_statement"`
	// PublishesPerToken is the worker's publish pipelines (one Redis round trip each) per token.
	PublishesPerToken float64 `json:"redis_round_trips_per_token"`
	// Delivery is model→browser per token; Floor is XADD→XREAD on the same Redis meanwhile.
	Delivery Latency `json:"delivery"`
	// Post is POST → 202; FirstToken is 202 → the turn's first token at its stream's reader, which
	// includes the model's first Interval.
	Post       Latency  `json:"post"`
	FirstToken Latency  `json:"first_token"`
	Floor      Latency  `json:"floor"`
	Timeline   []Sample `json:"timeline"`
	// Problems lists what went wrong (tokens lost, repeated or out of order, failed turns, stream
	// errors); empty on a clean run.
	Problems []string `json:"problems,omitempty"`
	problemN int
}

// OK says whether every turn completed with every token once and in order.
func (r *Result) OK() bool { return len(r.Problems) == 0 && r.Completed == r.Turns }

func (r *Result) problem(format string, args ...any) {
	r.problemN++
	if len(r.Problems) < 20 {
		r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
	}
}

var metricNames = []string{
	"turnstile_worker_inflight_turns", "go_memstats_heap_inuse_bytes", "go_memstats_stack_inuse_bytes",
	"go_goroutines", "process_cpu_seconds_total", "turnstile_worker_lease_renewal_rounds_total",
	`turnstile_worker_batch_duration_seconds_count{kind="publish"}`, "turnstile_worker_lease_renewals_total",
	"turnstile_worker_upstream_limit", "turnstile_worker_upstream_waiting", "turnstile_worker_upstream_inflight",
}

type runner struct {
	cfg   Config
	hc    *http.Client // streams and metrics
	pc    *http.Client // posts
	start time.Time

	mu        sync.Mutex
	res       Result
	lat       []time.Duration
	postLat   []time.Duration
	starts    []time.Duration
	done      int
	streaming int
}

// Run runs the scenario and returns its report; an error means it could not run (a stack that
// does not answer), while a run with lost or disordered tokens returns a Result that is not OK.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg.applyDefaults()
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 1024, 1024
	// Posts go through a few reused connections of their own: thousands of turns opening a fresh
	// connection each at once overflow the listener's backlog, and the SYN retries (1s, 3s, 7s)
	// would show as seconds of intake latency. Each stream holds a connection of its own anyway.
	ptr := http.DefaultTransport.(*http.Transport).Clone()
	ptr.MaxConnsPerHost, ptr.MaxIdleConnsPerHost = 256, 256
	r := &runner{cfg: cfg, hc: &http.Client{Transport: tr}, pc: &http.Client{Transport: ptr}}
	defer tr.CloseIdleConnections()
	defer ptr.CloseIdleConnections()
	r.res = Result{Turns: cfg.Turns, Tokens: cfg.Tokens, Interval: cfg.Interval}

	idle, err := r.sample(ctx)
	if err != nil {
		return nil, err
	}
	r.start = time.Now()
	r.res.Idle = idle

	var wg sync.WaitGroup
	floorCtx, stopFloor := context.WithCancel(ctx)
	var floor []time.Duration
	wg.Go(func() { floor = r.floor(floorCtx) })
	samplerCtx, stopSampler := context.WithCancel(ctx)
	wg.Go(func() { r.sampleLoop(samplerCtx) })

	var turns sync.WaitGroup
	step := cfg.Ramp / time.Duration(cfg.Turns)
	tick := time.NewTimer(0)
	for i := range cfg.Turns {
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
		if ctx.Err() != nil {
			break
		}
		tick.Reset(time.Until(r.start.Add(time.Duration(i+1) * step)))
		turns.Go(func() { r.turn(ctx, i) })
	}
	tick.Stop()
	turns.Wait()
	stopSampler()
	stopFloor()
	wg.Wait()
	if err := cfg.Redis.Del(context.WithoutCancel(ctx), cfg.FloorKey).Err(); err != nil {
		r.res.problem("delete floor key: %v", err)
	}

	res := r.res
	res.Delivery, res.Floor = summarise(r.lat), summarise(floor)
	res.Post, res.FirstToken = summarise(r.postLat), summarise(r.starts)
	r.analyse(&res)
	if res.problemN > len(res.Problems) {
		res.Problems = append(res.Problems, fmt.Sprintf("… %d problems in all", res.problemN))
	}
	if ctx.Err() != nil && res.Completed < res.Turns {
		res.Problems = append(res.Problems, fmt.Sprintf("timed out after %v with %d of %d turns done", cfg.Timeout, res.Completed, res.Turns))
	}
	return &res, nil
}

// analyse derives the per-turn figures from the timeline: memory per turn is the growth over the
// idle worker at the plateau, divided by the turns held then.
func (r *runner) analyse(res *Result) {
	tl := res.Timeline
	if len(tl) == 0 {
		return
	}
	best := 0
	for i, s := range tl {
		if s.Inflight >= tl[best].Inflight {
			best = i
		}
	}
	peak := tl[best].Inflight
	res.PeakHeld = peak
	// The plateau: the samples that held at least 90% of the peak. Memory is read at the one whose
	// heap was lowest — just after a collection, so the heap is the live one and not the garbage a
	// collection cycle lets accumulate (up to as much again at the default GOGC).
	// Only a sample whose turns were held a second before as well counts for memory: a turn the
	// worker has just claimed is in the gauge before its goroutines and model stream exist.
	var first, last *Sample
	p := tl[best]
	settled := false
	for i := range tl {
		if tl[i].Inflight < 0.9*peak {
			continue
		}
		if first == nil {
			first = &tl[i]
		}
		last = &tl[i]
		if i == 0 || math.Abs(tl[i].Inflight-tl[i-1].Inflight) > 0.02*tl[i].Inflight {
			continue
		}
		if !settled || tl[i].HeapBytes/tl[i].Inflight < p.HeapBytes/p.Inflight {
			p, settled = tl[i], true
		}
	}
	res.Plateau = p
	if p.Inflight > 0 {
		res.HeapPerTurn = (p.HeapBytes - res.Idle.HeapBytes) / p.Inflight
		res.StackPerTurn = (p.StackBytes - res.Idle.StackBytes) / p.Inflight
		res.GoroutinesPerTurn = (p.Goroutines - res.Idle.Goroutines) / p.Inflight
	}
	if first != nil && last.T > first.T {
		res.RenewalStatements = last.Renewals - first.Renewals
		res.RenewalHeartbeats = (last.T - first.T) / r.cfg.Heartbeat.Seconds()
		res.RenewalsPerHeartbeat = res.RenewalStatements / res.RenewalHeartbeats
		if res.RenewalStatements > 0 {
			res.LeasesPerStatement = (last.Leases - first.Leases) / res.RenewalStatements
		}
	}
	end := tl[len(tl)-1]
	if res.Delivered > 0 {
		res.CPUPerToken = time.Duration((end.CPUSeconds - res.Idle.CPUSeconds) / float64(res.Delivered) * 1e9)
		res.PublishesPerToken = (end.Publishes - res.Idle.Publishes) / float64(res.Delivered)
	}
}

func (r *runner) sample(ctx context.Context) (Sample, error) {
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	m, err := scrape.FetchSums(sctx, r.hc, r.cfg.WorkerMetricsURL, metricNames...)
	if err != nil {
		return Sample{}, err
	}
	s := Sample{
		Inflight: m[metricNames[0]], HeapBytes: m[metricNames[1]], StackBytes: m[metricNames[2]],
		Goroutines: m[metricNames[3]], CPUSeconds: m[metricNames[4]], Renewals: m[metricNames[5]],
		Publishes: m[metricNames[6]], Leases: m[metricNames[7]],
		UpstreamLimit: m[metricNames[8]], UpstreamWaiting: m[metricNames[9]], UpstreamInflight: m[metricNames[10]],
	}
	if !r.start.IsZero() {
		s.T = time.Since(r.start).Seconds()
	}
	s.ProcessCPU = map[string]float64{"generator": procCPU(os.Getpid())}
	s.ProcessWait = map[string]float64{"generator": procWait(os.Getpid())}
	for name, pid := range r.cfg.Processes {
		s.ProcessCPU[name] = procCPU(pid)
		s.ProcessWait[name] = procWait(pid)
	}
	return s, nil
}

func (r *runner) sampleLoop(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		s, err := r.sample(ctx)
		r.mu.Lock()
		if err == nil {
			s.Streaming = r.streaming
			r.res.Timeline = append(r.res.Timeline, s)
		} else if ctx.Err() == nil {
			r.res.MissedSamples++
		}
		done := r.done
		r.mu.Unlock()
		if r.cfg.Progress != nil {
			r.cfg.Progress(done, int(s.Inflight))
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// floor measures XADD→XREAD on the stack's Redis: every 20ms one entry carrying its send time,
// read back by a blocking XREAD (BLOCK bounded, since a blocking read ignores cancellation).
func (r *runner) floor(ctx context.Context) []time.Duration {
	var wg sync.WaitGroup
	var lat []time.Duration
	wg.Go(func() {
		last := "$"
		for ctx.Err() == nil {
			res, err := r.cfg.Redis.XRead(ctx, &redis.XReadArgs{Streams: []string{r.cfg.FloorKey, last}, Block: 200 * time.Millisecond}).Result()
			now := time.Now()
			if err != nil {
				continue
			}
			for _, st := range res {
				for _, m := range st.Messages {
					last = m.ID
					if ns, err := strconv.ParseInt(fmt.Sprint(m.Values["t"]), 10, 64); err == nil {
						lat = append(lat, now.Sub(time.Unix(0, ns)))
					}
				}
			}
		}
	})
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return lat
		case <-tick.C:
		}
		_ = r.cfg.Redis.XAdd(ctx, &redis.XAddArgs{
			Stream: r.cfg.FloorKey, MaxLen: 1000, Approx: true,
			Values: []string{"t", strconv.FormatInt(time.Now().UnixNano(), 10)},
		}).Err()
	}
}

type eventData struct {
	Attempt int    `json:"attempt"`
	Text    string `json:"text"`
}

// turn posts one turn of a session of its own and follows its stream to its terminal event.
func (r *runner) turn(ctx context.Context, i int) {
	sid := "inflight-" + strconv.Itoa(i) + "-" + uuid.NewString()[:8]
	tid := uuid.Must(uuid.NewV7()).String()
	posted := time.Now()
	err := r.post(ctx, sid, tid)
	accepted := time.Now()
	if err != nil {
		r.mu.Lock()
		r.res.problem("turn %d: post: %v", i, err)
		r.mu.Unlock()
		return
	}
	next, attempt, lastID, final := 0, 0, "", ""
	lat := make([]time.Duration, 0, r.cfg.Tokens)
	streaming := false
	var first time.Time
	for conn := 0; final == "" && ctx.Err() == nil && conn < 20; conn++ {
		err := r.follow(ctx, sid, tid, &lastID, func(ev sse.Event) bool {
			now := time.Now()
			switch ev.Type {
			case "turn.delta":
				var d eventData
				if err := json.Unmarshal([]byte(ev.Data), &d); err != nil {
					r.addProblem("turn %d: bad delta %q", i, ev.Data)
					return true
				}
				if d.Attempt != attempt {
					// A new attempt (after a takeover) streams the answer again from its start,
					// announced by turn.retrying; the browser starts over with it.
					if attempt != 0 {
						r.mu.Lock()
						r.res.Retried++
						r.mu.Unlock()
					}
					attempt, next = d.Attempt, 0
				}
				toks, err := fakechat.Parse(d.Text)
				if err != nil {
					r.addProblem("turn %d: %v", i, err)
				}
				for _, t := range toks {
					if t.Index != next {
						r.addProblem("turn %d: token %d where %d was due", i, t.Index, next)
					}
					next = t.Index + 1
					lat = append(lat, now.Sub(t.Sent))
				}
				if !streaming {
					streaming, first = true, now
					r.mu.Lock()
					r.streaming++
					r.mu.Unlock()
				}
			case "turn.completed", "turn.failed", "turn.cancelled", "turn.expired":
				final = ev.Type
				return false
			}
			return true
		})
		if err != nil && ctx.Err() == nil {
			r.addProblem("turn %d: stream: %v", i, err)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if streaming {
		r.streaming--
	}
	r.lat = append(r.lat, lat...)
	r.res.Delivered += len(lat)
	r.postLat = append(r.postLat, accepted.Sub(posted))
	if !first.IsZero() {
		r.starts = append(r.starts, first.Sub(accepted))
	}
	switch {
	case final == "turn.completed" && next == r.cfg.Tokens:
		r.res.Completed++
		r.done++
	case final == "turn.completed":
		r.res.problem("turn %d: completed after %d of %d tokens", i, next, r.cfg.Tokens)
	case final != "":
		r.res.problem("turn %d: %s", i, final)
	default:
		r.res.problem("turn %d: no terminal event after %d tokens", i, next)
	}
}

func (r *runner) addProblem(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.res.problem(format, args...)
}

func (r *runner) post(ctx context.Context, sid, tid string) error {
	body, _ := json.Marshal(map[string]any{"input": map[string]string{"text": "hold"}, "turn_id": tid})
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// A 503 or 429 is intake's backpressure: the turn may or may not be queued, and the turn ID the
	// generator minted makes sending it again safe. It waits what Retry-After says, as a client
	// should, until the post's own deadline.
	for {
		status, retryAfter, b, err := r.postOnce(pctx, sid, body)
		if err != nil {
			return err
		}
		switch {
		case status == http.StatusAccepted:
			return nil
		case status != http.StatusServiceUnavailable && status != http.StatusTooManyRequests:
			return fmt.Errorf("status %d: %s", status, b)
		}
		r.mu.Lock()
		r.res.PostRetries++
		r.mu.Unlock()
		select {
		case <-pctx.Done():
			return fmt.Errorf("status %d until the post's deadline: %s", status, b)
		case <-time.After(retryAfter):
		}
	}
}

// postOnce sends the turn once and returns the answer's status, how long its Retry-After asks to
// wait (at least 100 ms, at most 5 s) and the start of its body.
func (r *runner) postOnce(ctx context.Context, sid string, body []byte) (int, time.Duration, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.cfg.IntakeURL+"/v1/sessions/"+url.PathEscape(sid)+"/turns", bytes.NewReader(body))
	if err != nil {
		return 0, 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.pc.Do(req)
	if err != nil {
		return 0, 0, nil, err
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	_ = resp.Body.Close()
	wait := 100 * time.Millisecond
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
		wait = min(max(time.Duration(s)*time.Second, wait), 5*time.Second)
	}
	return resp.StatusCode, wait, b, nil
}

// follow reads one connection of the turn's stream, resuming after *lastID, until on returns false
// or the stream ends.
func (r *runner) follow(ctx context.Context, sid, tid string, lastID *string, on func(sse.Event) bool) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet,
		r.cfg.GatewayURL+"/v1/sessions/"+url.PathEscape(sid)+"/events?turn_id="+url.QueryEscape(tid), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	if *lastID != "" {
		req.Header.Set("Last-Event-ID", *lastID)
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	rd := sse.NewReader(resp.Body, 0)
	for {
		ev, err := rd.Next()
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return nil
			}
			return err
		}
		if ev.ID != "" {
			*lastID = ev.ID
		}
		if !on(ev) {
			return nil
		}
	}
}

// procCPU is a process's user and system CPU seconds from /proc/<pid>/stat, zero if unreadable.
func procCPU(pid int) float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // clock ticks at Linux's USER_HZ
}

// procWait is the seconds a process's threads have waited on a run queue, summed over its live
// threads from /proc/<pid>/task/*/schedstat (the second field, in nanoseconds); zero if unreadable.
func procWait(pid int) float64 {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var ns float64
	for _, t := range tasks {
		b, err := os.ReadFile(dir + "/" + t.Name() + "/schedstat") //nolint:gosec // a /proc path made of a PID and the kernel's task IDs
		if err != nil {
			continue
		}
		if f := strings.Fields(string(b)); len(f) >= 2 {
			v, _ := strconv.ParseFloat(f[1], 64)
			ns += v
		}
	}
	return ns / 1e9
}

// RunQueueWait is each process's average number of threads waiting for a CPU between the idle
// sample and the end: seconds of run-queue wait per second of the run.
func (r *Result) RunQueueWait() map[string]float64 {
	return r.perSecond(func(s Sample) map[string]float64 { return s.ProcessWait })
}

// CoresUsed is each process's average CPU (in cores) between the idle sample and the end.
func (r *Result) CoresUsed() map[string]float64 {
	out := r.perSecond(func(s Sample) map[string]float64 { return s.ProcessCPU })
	if n := len(r.Timeline); n > 0 && r.Timeline[n-1].T > 0 {
		end := r.Timeline[n-1]
		out["worker"] = (end.CPUSeconds - r.Idle.CPUSeconds) / end.T
	}
	return out
}

// perSecond is each process's growth of the per-process seconds that of picks from a sample,
// between the idle sample and the end, per second of the run.
func (r *Result) perSecond(of func(Sample) map[string]float64) map[string]float64 {
	out := map[string]float64{}
	if len(r.Timeline) == 0 {
		return out
	}
	end := r.Timeline[len(r.Timeline)-1]
	if end.T <= 0 {
		return out
	}
	idle := of(r.Idle)
	for name, v := range of(end) {
		out[name] = (v - idle[name]) / end.T
	}
	return out
}

func summarise(d []time.Duration) Latency {
	if len(d) == 0 {
		return Latency{}
	}
	slices.Sort(d)
	ms := func(x time.Duration) float64 { return float64(x) / 1e6 }
	q := func(p float64) time.Duration { return d[min(len(d)-1, int(p*float64(len(d))))] }
	return Latency{N: len(d), P50: ms(q(0.50)), P99: ms(q(0.99)), Max: ms(d[len(d)-1])}
}
