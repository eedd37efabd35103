package report

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/turnstile-run/turnstile/loadtest/internal/gen"
)

// Write saves r as <dir>/<name>.json and its plots as <dir>/<name>-rates.png,
// <dir>/<name>-backlog.png and (when the gauge was exported) <dir>/<name>-backlog-age.png.
// It returns the files written.
func Write(dir, name string, r gen.Report) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil { //nolint:gosec // reports are meant to be read by anyone on the machine
		return nil, err
	}
	var files []string
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	jf := filepath.Join(dir, name+".json")
	if err := os.WriteFile(jf, b, 0o644); err != nil { //nolint:gosec // reports are meant to be read by anyone on the machine
		return nil, err
	}
	files = append(files, jf)

	arr, comp, out, age := plotter.XYs{}, plotter.XYs{}, plotter.XYs{}, plotter.XYs{}
	for _, s := range r.Timeline {
		x := float64(s.T)
		arr = append(arr, plotter.XY{X: x, Y: float64(s.Arrivals)})
		comp = append(comp, plotter.XY{X: x, Y: float64(s.Completions)})
		out = append(out, plotter.XY{X: x, Y: float64(s.Outstanding)})
		if s.BacklogAge != nil {
			age = append(age, plotter.XY{X: x, Y: *s.BacklogAge})
		}
	}
	f, err := line(dir, name+"-rates.png", r.Scenario+": arrivals and completions", "turns / s", "arrivals", arr, "completions", comp)
	if err != nil {
		return files, err
	}
	files = append(files, f)
	f, err = line(dir, name+"-backlog.png", r.Scenario+": accepted turns not yet finished", "turns", "outstanding", out)
	if err != nil {
		return files, err
	}
	files = append(files, f)
	if len(age) > 0 {
		f, err = line(dir, name+"-backlog-age.png", r.Scenario+": backlog age (turnstile_backlog_age_seconds)", "seconds", "backlog age", age)
		if err != nil {
			return files, err
		}
		files = append(files, f)
	}
	return files, nil
}

func line(dir, file, title, ylabel string, series ...any) (string, error) {
	return xyLine(dir, file, title, "seconds since start", ylabel, false, series...)
}

func xyLine(dir, file, title, xlabel, ylabel string, logY bool, series ...any) (string, error) {
	return xyPlot(dir, file, title, xlabel, ylabel, logY, plotutil.AddLines, series...)
}

func xyPlot(dir, file, title, xlabel, ylabel string, logY bool, add func(*plot.Plot, ...any) error, series ...any) (string, error) {
	p := plot.New()
	if logY {
		p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	}
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	p.Add(plotter.NewGrid())
	if err := add(p, series...); err != nil {
		return "", fmt.Errorf("plot %s: %w", file, err)
	}
	p.Legend.Top = true
	path := filepath.Join(dir, file)
	if err := p.Save(9*vg.Inch, 4*vg.Inch, path); err != nil {
		return "", fmt.Errorf("save %s: %w", file, err)
	}
	return path, nil
}

// Series is one named line of a plot.
type Series struct {
	Name   string
	Points plotter.XYs
}

// Line saves a line plot of series over seconds since the start as <dir>/<file> and returns its path.
func Line(dir, file, title, ylabel string, series ...Series) (string, error) {
	return XYLine(dir, file, title, "seconds since start", ylabel, false, series...)
}

// XYLine is Line with its own label of the x axis, and a logarithmic y axis when logY (every y
// must then be above zero).
func XYLine(dir, file, title, xlabel, ylabel string, logY bool, series ...Series) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil { //nolint:gosec // reports are meant to be read by anyone on the machine
		return "", err
	}
	args := make([]any, 0, 2*len(series))
	for _, s := range series {
		args = append(args, s.Name, s.Points)
	}
	return xyLine(dir, file, title, xlabel, ylabel, logY, args...)
}

// XYPoints is XYLine with every point marked and the y axis from zero, for series of a few
// measurements each (a series of one point is then still seen).
func XYPoints(dir, file, title, xlabel, ylabel string, series ...Series) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil { //nolint:gosec // reports are meant to be read by anyone on the machine
		return "", err
	}
	args := make([]any, 0, 2*len(series))
	for _, s := range series {
		args = append(args, s.Name, s.Points)
	}
	add := func(p *plot.Plot, vs ...any) error {
		if err := plotutil.AddLinePoints(p, vs...); err != nil {
			return err
		}
		// From zero, with room above the highest point for the legend.
		p.Y.Min, p.Y.Max = 0, 1.4*p.Y.Max
		p.Legend.Left = true
		return nil
	}
	return xyPlot(dir, file, title, xlabel, ylabel, false, add, args...)
}
