package peer

import (
	"cmp"
	"context"
	"fmt"
	"slices"
)

// Series is several comparisons run one after another, and the median of each figure over them.
// On a shared machine one run's rates move by a fifth or more from the next run's (River's and
// turnstile's alike, and not always together), so a figure worth quoting is a median of rounds.
type Series struct {
	Rounds []Comparison `json:"rounds"`
	Median Medians      `json:"median"`
}

// Medians are the medians over a series' rounds. Each ratio is the median of the rounds' own
// ratios, each taken within one run, not the ratio of the median rates.
type Medians struct {
	Turnstile          Figures `json:"turnstile"`
	River              Figures `json:"river"`
	Floor              Figures `json:"floor"`
	TurnstileOverRiver float64 `json:"turnstile_over_river"`
	TurnstileOverFloor float64 `json:"turnstile_over_floor"`
	FloorOverRiver     float64 `json:"floor_over_river"`
}

// Figures is one side's medians: its rate and its CPU per job, each component on its own.
type Figures struct {
	PerSec float64   `json:"per_sec"`
	CPU    CPUPerJob `json:"cpu_per_job"`
}

// RunRounds runs Run rounds times, one after another, and summarizes the rounds.
func RunRounds(ctx context.Context, o Options, rounds int) (Series, error) {
	if rounds < 1 {
		return Series{}, fmt.Errorf("rounds: %d, want at least 1", rounds)
	}
	var s Series
	for i := range rounds {
		c, err := Run(ctx, o)
		if err != nil {
			return s, fmt.Errorf("round %d of %d: %w", i+1, rounds, err)
		}
		s.Rounds = append(s.Rounds, c)
	}
	s.Median = summarize(s.Rounds)
	return s, nil
}

// summarize takes the median of every figure of the rounds.
func summarize(rounds []Comparison) Medians {
	of := func(f func(Comparison) float64) float64 {
		vs := make([]float64, len(rounds))
		for i, c := range rounds {
			vs[i] = f(c)
		}
		return median(vs)
	}
	side := func(r func(Comparison) Result) Figures {
		fig := Figures{
			PerSec: of(func(c Comparison) float64 { return r(c).PerSec }),
			CPU:    CPUPerJob{Process: of(func(c Comparison) float64 { return r(c).CPU.Process })},
		}
		fig.CPU.Postgres = medianOf(rounds, func(c Comparison) *float64 { return r(c).CPU.Postgres })
		fig.CPU.Redis = medianOf(rounds, func(c Comparison) *float64 { return r(c).CPU.Redis })
		return fig
	}
	return Medians{
		Turnstile:          side(func(c Comparison) Result { return c.Turnstile }),
		River:              side(func(c Comparison) Result { return c.River }),
		Floor:              side(func(c Comparison) Result { return c.Floor }),
		TurnstileOverRiver: of(func(c Comparison) float64 { return c.Ratio }),
		TurnstileOverFloor: of(func(c Comparison) float64 { return c.TurnstileOverFloor }),
		FloorOverRiver:     of(func(c Comparison) float64 { return c.FloorOverRiver }),
	}
}

// medianOf is the median of a figure the rounds may lack (a server not on this machine): nil unless
// every round has it.
func medianOf(rounds []Comparison, f func(Comparison) *float64) *float64 {
	vs := make([]float64, 0, len(rounds))
	for _, c := range rounds {
		v := f(c)
		if v == nil {
			return nil
		}
		vs = append(vs, *v)
	}
	m := median(vs)
	return &m
}

// median is the middle value, or the mean of the two middle values of an even count; 0 of none.
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// MedianTurnstile is the round whose turnstile rate is the median of the series' (the lower of the
// two middle ones for an even count).
func (s Series) MedianTurnstile() Result {
	rs := make([]Result, len(s.Rounds))
	for i, c := range s.Rounds {
		rs[i] = c.Turnstile
	}
	slices.SortFunc(rs, func(a, b Result) int { return cmp.Compare(a.PerSec, b.PerSec) })
	return rs[(len(rs)-1)/2]
}
