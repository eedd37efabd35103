package latency

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/turnstile-run/turnstile/loadtest/internal/gen"
	"github.com/turnstile-run/turnstile/loadtest/internal/scrape"
)

// Config tunes Run.
type Config struct {
	// Fractions of the measured capacity to offer, one level each. Defaults to 0.1, 0.5, 0.9.
	Fractions []float64
	// Level is how long each level's arrivals last.
	Level time.Duration
	// CalibrateRate and Calibrate start the capacity measurement (gen.Generator.Calibrate).
	CalibrateRate float64
	Calibrate     time.Duration
	// CalibrateAttempts is how many calibrations at most, each at twice the rate of the one before
	// while the workers keep up. Defaults to 3.
	CalibrateAttempts int
	// DrainMax bounds each wait for the stack to go idle.
	DrainMax time.Duration
	// Floor is the probe run through each level, on a topic and a stream named after its own with
	// the level's percentage appended.
	Floor Floor
	// Phase, when not nil, is told of each phase and its longest time.
	Phase func(string, time.Duration)
	// MetricsURL, when set, is the /metrics of the stack's process (intake, worker and gateway):
	// each level then reports the mean of each stage on a turn's way to its first delta
	// (StageMeanMs).
	MetricsURL string
}

// stage is a step on a turn's way to its first delta whose mean a level reports, read from a
// histogram of the stack (its name and label selector).
type stage struct{ name, metric, labels string }

// stages are, in a turn's order: intake's produce to Kafka's acknowledgement (acks from every
// in-sync replica), the worker's group-commit batches — the claim, the publish of events to Redis,
// and the completion's commit, which runs beside the publish of a quick agent's first events — and
// the gateway's delivery, from an event's append to Redis to its write to the SSE reader (the
// Pub/Sub wake and the read of the stream included). What they leave out is the HTTP exchange of
// the POST, the worker's fetch from Kafka, and the SSE reader's own read.
var stages = []stage{
	{"produce", "turnstile_intake_produce_duration_seconds", ""},
	{"claim", batchMetric, `{kind="claim"}`},
	{"publish", batchMetric, `{kind="publish"}`},
	{"complete", batchMetric, `{kind="complete"}`},
	{"delivery", "turnstile_gateway_delivery_lag_seconds", ""},
}

// Stages names the stages StageMeanMs reports, in a turn's order.
func Stages() []string {
	out := make([]string, len(stages))
	for i, st := range stages {
		out[i] = st.name
	}
	return out
}

// TargetAddedP50Ms and TargetAddedP99Ms are what the platform may add to the first delta beyond
// the floor at half of the capacity (issue 27).
const (
	TargetAddedP50Ms = 3.0
	TargetAddedP99Ms = 10.0
	// TargetFraction is the load the target applies at.
	TargetFraction = 0.5
)

// Level is one load level's figures, in milliseconds.
type Level struct {
	Fraction float64 `json:"fraction_of_capacity"`
	Rate     float64 `json:"offered_per_sec"`
	gen.Waits
	Floor gen.Quantiles `json:"floor"`
	// Added is the first delta's p50 and p99 beyond the floor's; AddedStarted turn.started's.
	AddedP50        float64 `json:"first_delta_added_p50_ms"`
	AddedP99        float64 `json:"first_delta_added_p99_ms"`
	AddedStartedP50 float64 `json:"started_added_p50_ms"`
	AddedStartedP99 float64 `json:"started_added_p99_ms"`
	// StageMeanMs is the mean of each stage (stages) during the level.
	StageMeanMs map[string]float64 `json:"stage_mean_ms,omitempty"`
}

// Report is the scenario's outcome.
type Report struct {
	Capacity gen.Calibration `json:"capacity"`
	Levels   []Level         `json:"levels"`
	// Met says whether the level at TargetFraction kept within TargetAddedP50Ms and
	// TargetAddedP99Ms.
	Met   bool     `json:"target_met"`
	Notes []string `json:"notes,omitempty"`
}

// Run measures the capacity with g, then offers each fraction of it for cfg.Level with the floor
// probe running, waits for the stack to go idle, and times the level's turns. g must be started.
func Run(ctx context.Context, g *gen.Generator, cfg Config) (Report, error) {
	if len(cfg.Fractions) == 0 {
		cfg.Fractions = []float64{0.1, 0.5, 0.9}
	}
	phase := cfg.Phase
	if phase == nil {
		phase = func(string, time.Duration) {}
	}
	var r Report
	if cfg.CalibrateAttempts <= 0 {
		cfg.CalibrateAttempts = 3
	}
	c, err := g.Calibrate(ctx, cfg.CalibrateRate, cfg.Calibrate, cfg.DrainMax, cfg.CalibrateAttempts, phase)
	if err != nil {
		return r, err
	}
	r.Capacity = c
	if !c.Saturated {
		r.Notes = append(r.Notes, fmt.Sprintf("the calibration at %.0f/s did not saturate the workers: the capacity %.1f/s is a lower bound", c.Rate, c.PerSec))
	}
	for _, f := range cfg.Fractions {
		l, err := level(ctx, g, cfg, f, c.PerSec, phase)
		if err != nil {
			return r, err
		}
		r.Levels = append(r.Levels, l)
		if f == TargetFraction {
			r.Met = l.AddedP50 <= TargetAddedP50Ms && l.AddedP99 <= TargetAddedP99Ms && l.FirstDelta.N > 0
		}
	}
	return r, nil
}

// level offers fraction of capacity for cfg.Level with the floor probe running beside it.
func level(ctx context.Context, g *gen.Generator, cfg Config, fraction, capacity float64, phase func(string, time.Duration)) (Level, error) {
	l := Level{Fraction: fraction, Rate: fraction * capacity}
	// A topic and a stream of the level's own: the probe reads both from their start.
	probe := cfg.Floor
	suffix := fmt.Sprintf("-%.0f", 100*fraction)
	probe.Topic, probe.Key = probe.Topic+suffix, probe.Key+suffix
	if err := probe.Prepare(ctx); err != nil {
		return l, err
	}
	pctx, stop := context.WithCancel(ctx)
	var floor []time.Duration
	var floorErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		floor, floorErr = probe.Run(pctx)
	}()
	phase(fmt.Sprintf("%.0f%% of capacity", 100*fraction), cfg.Level)
	before := readStages(ctx, cfg.MetricsURL)
	from := g.Elapsed()
	g.Arrive(ctx, fmt.Sprintf("latency-%.0f%%", 100*fraction), l.Rate, cfg.Level)
	to := g.Elapsed()
	l.StageMeanMs = stageMeans(before, readStages(ctx, cfg.MetricsURL))
	stop()
	wg.Wait()
	if floorErr != nil {
		return l, floorErr
	}
	phase("drain", cfg.DrainMax)
	if !g.WaitIdle(ctx, cfg.DrainMax) {
		return l, fmt.Errorf("the %.0f%% level did not drain within %v", 100*fraction, cfg.DrainMax)
	}
	l.Waits, l.Floor = g.Waits(from, to), gen.QuantilesOf(floor)
	l.AddedP50, l.AddedP99 = l.FirstDelta.P50-l.Floor.P50, l.FirstDelta.P99-l.Floor.P99
	l.AddedStartedP50, l.AddedStartedP99 = l.Started.P50-l.Floor.P50, l.Started.P99-l.Floor.P99
	return l, nil
}

// readStages reads the sums and counts of the stages' histograms; nil without a URL or on a failed
// scrape (the level then reports none).
func readStages(ctx context.Context, url string) map[string]float64 {
	if url == "" {
		return nil
	}
	var names []string
	for _, st := range stages {
		names = append(names, st.metric+"_sum"+st.labels, st.metric+"_count"+st.labels)
	}
	m, err := scrape.FetchSums(ctx, http.DefaultClient, url, names...)
	if err != nil {
		return nil
	}
	return m
}

// batchMetric is the worker's histogram of batch round trips, by kind.
const batchMetric = "turnstile_worker_batch_duration_seconds"

// stageMeans is the mean of each stage between two readings, in milliseconds.
func stageMeans(a, b map[string]float64) map[string]float64 {
	if a == nil || b == nil {
		return nil
	}
	out := map[string]float64{}
	for _, st := range stages {
		sum, count := st.metric+"_sum"+st.labels, st.metric+"_count"+st.labels
		if n := b[count] - a[count]; n > 0 {
			out[st.name] = 1000 * (b[sum] - a[sum]) / n
		}
	}
	return out
}
