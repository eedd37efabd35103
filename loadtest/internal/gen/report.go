package gen

import (
	"context"
	"sort"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Report is the outcome of a run, written as JSON.
type Report struct {
	Scenario  string    `json:"scenario"`
	RunID     string    `json:"run_id"`
	StartedAt time.Time `json:"started_at"`
	Seconds   float64   `json:"seconds"`

	Sent     int `json:"sent"`
	Accepted int `json:"accepted"`
	// Refused counts refusals by status and problem type ("503 backlog-too-old"), or
	// "transport_error".
	Refused   map[string]int `json:"refused_by_status"`
	Completed int            `json:"completed"`

	IntakeLatency Quantiles `json:"intake_latency"`
	FirstEvent    Quantiles `json:"time_to_first_event"`
	TurnLatency   Quantiles `json:"turn_latency"`

	// BacklogAge says whether the gauge was found; its samples are in the timeline.
	BacklogAge BacklogAgeInfo `json:"backlog_age"`

	Correctness Correctness `json:"correctness"`
	Burst       *Burst      `json:"burst,omitempty"`
	Notes       []string    `json:"notes,omitempty"`
	Timeline    []Second    `json:"timeline"`
}

// BacklogAgeInfo describes the scraped backlog-age gauge.
type BacklogAgeInfo struct {
	Metric  string  `json:"metric"`
	Scraped bool    `json:"scraped"`
	Present bool    `json:"present"`
	MaxSec  float64 `json:"max_seconds,omitempty"`
	LastErr string  `json:"last_error,omitempty"`
}

// Finish closes the streams, checks Postgres (when pool is not nil) and returns the report.
func (g *Generator) Finish(ctx context.Context, scenario string, pool *pgxpool.Pool) (Report, error) {
	g.Stop()
	var pgErr error
	var c Correctness
	if pool != nil {
		pgErr = g.checkPostgres(ctx, pool, &c)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	pgc := c.Postgres
	c = g.correctnessLocked()
	c.Postgres = pgc
	c.Examples = g.issues.examples
	r := Report{
		Scenario: scenario, RunID: g.cfg.RunID, StartedAt: g.start, Seconds: time.Since(g.start).Seconds(),
		Refused: g.refused, Correctness: c, Timeline: g.timeline,
		IntakeLatency: quantiles(g.issues.intake),
	}
	var first, whole []time.Duration
	for _, t := range g.turns {
		r.Sent++
		if t.accepted {
			r.Accepted++
		}
		if t.terminals > 0 {
			r.Completed++
			whole = append(whole, t.terminal.Sub(t.sentAt))
		}
		if !t.firstEvent.IsZero() {
			first = append(first, t.firstEvent.Sub(t.sentAt))
		}
	}
	r.FirstEvent, r.TurnLatency = quantiles(first), quantiles(whole)
	r.BacklogAge = BacklogAgeInfo{Metric: BacklogAgeMetric, Scraped: g.backlog.scraped, Present: g.backlog.present, LastErr: g.backlog.lastErr}
	for _, s := range g.timeline {
		if s.BacklogAge != nil {
			r.BacklogAge.MaxSec = max(r.BacklogAge.MaxSec, *s.BacklogAge)
		}
	}
	if !g.backlog.present {
		r.Notes = append(r.Notes, BacklogAgeMetric+" was not exported by the stack: backlog age over time is absent; the outstanding-turn count stands in for it")
	}
	return r, pgErr
}

// Burst is the Little's-law check of the burst scenario.
//
// The workers' capacity depends on what else runs on their cores, and the load generator does when
// it runs beside the stack: posting 2μ turns a second and following their streams costs CPU the
// workers then lack. So the check predicts each phase from the capacity measured, before the
// burst, under the same arrival rate: BurstCapacityPerSec while a rehearsal posts at the burst rate,
// NormalCapacityPerSec while the rehearsal's backlog drains under normal arrivals. CapacityPerSec,
// measured while the generator posts nothing, sets the rates (normal μ/2, burst 2μ) and gives the
// naive prediction, reported beside the checked one.
type Burst struct {
	// CapacityPerSec is the completion rate measured while the calibration backlog drained with no
	// arrivals.
	CapacityPerSec float64 `json:"capacity_per_sec"`
	// BurstCapacityPerSec is the completion rate measured while the rehearsal posted at the burst
	// rate (a backlog growing throughout).
	BurstCapacityPerSec float64 `json:"capacity_at_burst_rate_per_sec"`
	// NormalCapacityPerSec is the completion rate measured while the rehearsal's backlog drained
	// under arrivals at the normal rate.
	NormalCapacityPerSec float64 `json:"capacity_at_normal_rate_per_sec"`
	// BacklogCapacityPerSec is the completion rate measured while the burst's backlog drained.
	BacklogCapacityPerSec float64 `json:"capacity_during_backlog_per_sec"`
	NormalRate            float64 `json:"normal_rate_per_sec"`
	BurstRate             float64 `json:"burst_rate_per_sec"`
	BurstSeconds          float64 `json:"burst_seconds"`
	// Measured arrival rates during the burst and the normal phase after it.
	MeasuredBurstRate  float64 `json:"measured_burst_rate_per_sec"`
	MeasuredNormalRate float64 `json:"measured_normal_rate_per_sec"`

	// PredictedPeak and PredictedDrainSec use the load-matched capacities; the Naive ones use
	// CapacityPerSec for both phases.
	PredictedPeak          float64 `json:"predicted_peak_backlog"`
	MeasuredPeak           float64 `json:"measured_peak_backlog"`
	PredictedDrainSec      float64 `json:"predicted_drain_seconds"`
	MeasuredDrainSec       float64 `json:"measured_drain_seconds"`
	NaivePredictedPeak     float64 `json:"naive_predicted_peak_backlog"`
	NaivePredictedDrainSec float64 `json:"naive_predicted_drain_seconds"`
	NaivePeakRatio         float64 `json:"naive_peak_measured_over_predicted"`
	NaiveDrainRatio        float64 `json:"naive_drain_measured_over_predicted"`
	PeakRatio              float64 `json:"peak_measured_over_predicted"`
	DrainRatio             float64 `json:"drain_measured_over_predicted"`
	WithinFifteenPct       bool    `json:"within_15_percent"`
	BaselineOutstandng     float64 `json:"baseline_outstanding"`
}

// AnalyseBurst fills the measured side of b from the timeline. burstStart and burstEnd are offsets
// from Start; the baseline is the median outstanding count of the normal phase before the burst.
func (g *Generator) AnalyseBurst(b *Burst, normalStart, burstStart, burstEnd time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	tl := g.timeline
	sec := func(d time.Duration) int { return min(int(d/time.Second), len(tl)) }
	var base []int
	for i := sec(normalStart) + 2; i < sec(burstStart); i++ {
		base = append(base, tl[i].Outstanding)
	}
	sort.Ints(base)
	baseline := 0.0
	if len(base) > 0 {
		baseline = float64(base[len(base)/2])
	}
	b.BaselineOutstandng = baseline
	arr := 0
	for i := sec(burstStart); i < sec(burstEnd); i++ {
		arr += tl[i].Arrivals
	}
	b.MeasuredBurstRate = float64(arr) / b.BurstSeconds
	peak, peakAt := 0.0, sec(burstEnd)
	for i := sec(burstStart); i < len(tl); i++ {
		if o := float64(tl[i].Outstanding); o > peak {
			peak, peakAt = o, i
		}
	}
	b.MeasuredPeak = peak - baseline
	// Drain ends at the first second after the peak when the backlog is back to the baseline
	// (within a second's worth of normal arrivals).
	drainEnd := -1
	for i := peakAt; i < len(tl); i++ {
		if float64(tl[i].Outstanding) <= baseline+b.NormalRate {
			drainEnd = i
			break
		}
	}
	after := 0
	n := 0
	for i := sec(burstEnd); i < len(tl) && (drainEnd < 0 || i < drainEnd); i++ {
		after += tl[i].Arrivals
		n++
	}
	if n > 0 {
		b.MeasuredNormalRate = float64(after) / float64(n)
	}
	if drainEnd >= 0 {
		b.MeasuredDrainSec = float64(drainEnd - sec(burstEnd))
		comp := 0
		for i := sec(burstStart) + 5; i < drainEnd-2; i++ {
			comp += tl[i].Completions
		}
		if w := drainEnd - 2 - (sec(burstStart) + 5); w > 0 {
			b.BacklogCapacityPerSec = float64(comp) / float64(w)
		}
	}
	predict := func(muBurst, muNormal float64) (peak, drain, peakRatio, drainRatio float64) {
		peak = max(b.MeasuredBurstRate-muBurst, 0) * b.BurstSeconds
		if d := muNormal - b.MeasuredNormalRate; d > 0 {
			drain = peak / d
		}
		if peak > 0 {
			peakRatio = b.MeasuredPeak / peak
		}
		if drain > 0 && drainEnd >= 0 {
			drainRatio = b.MeasuredDrainSec / drain
		}
		return peak, drain, peakRatio, drainRatio
	}
	b.NaivePredictedPeak, b.NaivePredictedDrainSec, b.NaivePeakRatio, b.NaiveDrainRatio = predict(b.CapacityPerSec, b.CapacityPerSec)
	b.PredictedPeak, b.PredictedDrainSec, b.PeakRatio, b.DrainRatio = predict(b.loadMatched())
	within := func(r float64) bool { return r >= 0.85 && r <= 1.15 }
	b.WithinFifteenPct = within(b.PeakRatio) && within(b.DrainRatio)
}

// loadMatched is the capacities the prediction uses: the rehearsal's at the burst rate and at the
// normal rate, or without a rehearsal the idle generator's for both (the naive prediction).
func (b *Burst) loadMatched() (muBurst, muNormal float64) {
	if b.BurstCapacityPerSec <= 0 || b.NormalCapacityPerSec <= 0 {
		return b.CapacityPerSec, b.CapacityPerSec
	}
	return b.BurstCapacityPerSec, b.NormalCapacityPerSec
}

// PlannedPeak is the peak backlog the burst is predicted to leave before it runs: its planned rate
// against the capacity the prediction uses (AnalyseBurst predicts from the measured rate).
func (b *Burst) PlannedPeak() float64 {
	muBurst, _ := b.loadMatched()
	return max(b.BurstRate-muBurst, 0) * b.BurstSeconds
}
