package gen

import (
	"context"
	"fmt"
	"time"
)

// Waits are the times from a turn's POST to the first events of its first attempt at a stream
// reader that was waiting already, the wait a user watching the session sees.
type Waits struct {
	Started    Quantiles `json:"post_to_started"`
	FirstDelta Quantiles `json:"post_to_first_delta"`
	// Unwatched counts the turns left out because their session's stream had not answered yet
	// when they were posted (their events were read as history, not as they happened).
	Unwatched int `json:"unwatched"`
}

// Waits measures the turns posted between two offsets from Start.
func (g *Generator) Waits(from, to time.Duration) Waits {
	g.mu.Lock()
	defer g.mu.Unlock()
	a, b := g.start.Add(from), g.start.Add(to)
	var w Waits
	var started, delta []time.Duration
	for _, t := range g.turns {
		if !t.accepted || t.sentAt.Before(a) || !t.sentAt.Before(b) {
			continue
		}
		if o := t.sess.openAt; o.IsZero() || !o.Before(t.sentAt) {
			w.Unwatched++
			continue
		}
		if !t.started.IsZero() {
			started = append(started, t.started.Sub(t.sentAt))
		}
		if !t.firstDelta.IsZero() {
			delta = append(delta, t.firstDelta.Sub(t.sentAt))
		}
	}
	w.Started, w.FirstDelta = quantiles(started), quantiles(delta)
	return w
}

// Calibration says how Calibrate measured the capacity.
type Calibration struct {
	PerSec float64 `json:"capacity_per_sec"`
	// Rate is the arrival rate of the calibration that measured it; Saturated is false when even
	// that rate left less than a second of arrivals outstanding (the workers kept up, so the figure
	// is a lower bound of the capacity).
	Rate      float64 `json:"rate_per_sec"`
	Saturated bool    `json:"saturated"`
}

// Calibrate measures the workers' capacity μ with the generator otherwise idle: it posts at rate
// for d and takes the completion rate while the backlog that built is worked off. A rate the
// workers keep up with builds no backlog and measures the rate, not the capacity: when less than a
// second of arrivals is left outstanding as the posting stops, it calibrates again at twice the
// rate, attempts times in all. phase, when not nil, is told of each phase and its longest time.
func (g *Generator) Calibrate(ctx context.Context, rate float64, d, drainMax time.Duration, attempts int, phase func(string, time.Duration)) (Calibration, error) {
	if phase == nil {
		phase = func(string, time.Duration) {}
	}
	for attempt := 1; ; attempt++ {
		phase(fmt.Sprintf("calibrate %.0f/s", rate), d)
		c0 := g.Elapsed()
		g.Arrive(ctx, "calibrate", rate, d)
		left := g.Outstanding()
		phase("calibrate drain", drainMax)
		if !g.WaitIdle(ctx, drainMax) {
			return Calibration{}, fmt.Errorf("calibration backlog did not drain within %v", drainMax)
		}
		// Capacity: the completion rate while the calibration backlog was being worked off.
		mu := g.BusyRate(c0, g.Elapsed()+time.Second)
		if mu <= 0 {
			return Calibration{}, fmt.Errorf("calibration measured no completions")
		}
		c := Calibration{PerSec: mu, Rate: rate, Saturated: left >= int(rate)}
		if c.Saturated || attempt >= attempts {
			return c, nil
		}
		rate *= 2
	}
}
