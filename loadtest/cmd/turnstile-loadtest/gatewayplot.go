package main

import (
	"bufio"
	"cmp"
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot/plotter"

	"github.com/turnstile-run/turnstile/loadtest/internal/report"
)

// fanoutLine matches one result line of BenchmarkGatewayFanout: the protocol, then its metrics as
// "<value> <unit>" pairs.
var fanoutLine = regexp.MustCompile(`^BenchmarkGatewayFanout/(\w+)-\d+\s+\d+\s+(.*)$`)

// fanoutPoint is one run of the benchmark: its streams and what an idle one cost the gateway.
type fanoutPoint struct {
	streams, heap, stacks float64
}

// readFanout returns the points of a go test -bench output, by protocol.
func readFanout(file string) (map[string][]fanoutPoint, error) {
	f, err := os.Open(file) //nolint:gosec // the operator names the file to plot
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	out := map[string][]fanoutPoint{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := fanoutLine.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		metrics := map[string]float64{}
		fields := strings.Fields(m[2])
		for i := 0; i+1 < len(fields); i += 2 {
			if v, err := strconv.ParseFloat(fields[i], 64); err == nil {
				metrics[fields[i+1]] = v
			}
		}
		p := fanoutPoint{streams: metrics["streams"], heap: metrics["heap-B/stream"], stacks: metrics["stack-B/stream"]}
		if p.streams > 0 {
			out[m[1]] = append(out[m[1]], p)
		}
	}
	return out, sc.Err()
}

// plotGateway draws heap plus stacks per idle stream by streams open, one line per label and
// protocol, beside the 8 KiB target, from BenchmarkGatewayFanout outputs (-plot-gateway
// label=file,...). Several runs of one label at different sizes make its line.
func plotGateway(o options) error {
	var series []report.Series
	for _, spec := range strings.Split(o.plotGateway, ",") {
		label, file, ok := strings.Cut(spec, "=")
		if !ok {
			return fmt.Errorf("-plot-gateway: %q is not label=file", spec)
		}
		byProto, err := readFanout(file)
		if err != nil {
			return fmt.Errorf("-plot-gateway: %w", err)
		}
		if len(byProto) == 0 {
			return fmt.Errorf("-plot-gateway: no BenchmarkGatewayFanout result with a streams metric in %s", file)
		}
		for _, proto := range slices.Sorted(func(yield func(string) bool) {
			for k := range byProto {
				if !yield(k) {
					return
				}
			}
		}) {
			pts := byProto[proto]
			slices.SortFunc(pts, func(a, b fanoutPoint) int { return cmp.Compare(a.streams, b.streams) })
			xy := make(plotter.XYs, len(pts))
			for i, p := range pts {
				xy[i] = plotter.XY{X: p.streams, Y: (p.heap + p.stacks) / 1024}
			}
			series = append(series, report.Series{Name: label + ", " + proto, Points: xy})
		}
	}
	lo, hi := math.Inf(1), 0.0
	for _, s := range series {
		for _, p := range s.Points {
			lo, hi = min(lo, p.X), max(hi, p.X)
		}
	}
	series = append(series, report.Series{Name: "target, 8 KiB", Points: plotter.XYs{{X: lo, Y: 8}, {X: hi, Y: 8}}})
	path, err := report.XYPoints(o.out, "gateway-memory-by-streams.png", "gateway: heap + goroutine stacks per idle stream",
		"streams open", "KiB per idle stream", series...)
	if err != nil {
		return err
	}
	fmt.Println(path)
	return nil
}
