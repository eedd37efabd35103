package latency

import (
	"encoding/json"
	"os"
	"path/filepath"

	"gonum.org/v1/plot/plotter"

	"github.com/turnstile-run/turnstile/loadtest/internal/report"
)

// Write saves r as <dir>/latency.json and the plot of latency by load as <dir>/latency-by-load.png,
// and returns the files written.
func Write(dir string, r Report) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil { //nolint:gosec // reports are meant to be read by anyone on the machine
		return nil, err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	jf := filepath.Join(dir, "latency.json")
	if err := os.WriteFile(jf, b, 0o644); err != nil { //nolint:gosec // reports are meant to be read by anyone on the machine
		return nil, err
	}
	var d50, d99, s50, f50, f99 plotter.XYs
	// The y axis is logarithmic (the levels' figures span milliseconds to seconds); a figure below
	// a microsecond (an empty level's zero) is drawn at one.
	at := func(x, ms float64) plotter.XY { return plotter.XY{X: x, Y: max(ms, 0.001)} }
	for _, l := range r.Levels {
		x := 100 * l.Fraction
		d50 = append(d50, at(x, l.FirstDelta.P50))
		d99 = append(d99, at(x, l.FirstDelta.P99))
		s50 = append(s50, at(x, l.Started.P50))
		f50 = append(f50, at(x, l.Floor.P50))
		f99 = append(f99, at(x, l.Floor.P99))
	}
	pf, err := report.XYLine(dir, "latency-by-load.png", "POST → first event at a waiting SSE reader, beside the floor",
		"% of the capacity measured in the same run", "ms (log scale)", true,
		report.Series{Name: "first delta p99", Points: d99}, report.Series{Name: "first delta p50", Points: d50},
		report.Series{Name: "turn.started p50", Points: s50},
		report.Series{Name: "floor p99", Points: f99}, report.Series{Name: "floor p50", Points: f50})
	if err != nil {
		return []string{jf}, err
	}
	return []string{jf, pf}, nil
}
