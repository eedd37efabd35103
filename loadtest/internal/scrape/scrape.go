package scrape

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
)

// Max returns the largest sample of the metric name (over all its label sets) in a text exposition,
// and whether any sample was found.
func Max(r io.Reader, name string) (float64, bool, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	best, found := math.Inf(-1), false
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		if rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue // a longer name with this prefix
		}
		if rest[0] == '{' {
			end := strings.LastIndexByte(rest, '}')
			if end < 0 {
				continue
			}
			rest = rest[end+1:]
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			continue
		}
		found = true
		best = max(best, v)
	}
	if err := sc.Err(); err != nil {
		return 0, false, fmt.Errorf("read metrics: %w", err)
	}
	if !found {
		return 0, false, nil
	}
	return best, true, nil
}

// Fetch GETs url and returns Max of the metric name.
func Fetch(ctx context.Context, hc *http.Client, url, name string) (float64, bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, false, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, false, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return 0, false, fmt.Errorf("scrape %s: status %d", url, resp.StatusCode)
	}
	return Max(resp.Body, name)
}

// Sums returns, for each of names, the sum of its samples in a text exposition. A plain name sums
// every label set of the metric; a name with labels (`m_count{kind="publish"}`, labels as the
// exposition writes them) sums that series only. A name without samples is absent from the map.
func Sums(r io.Reader, names ...string) (map[string]float64, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	out := map[string]float64{}
	for sc.Scan() {
		line := sc.Text()
		for _, name := range names {
			if !strings.HasPrefix(line, name) {
				continue
			}
			rest := line[len(name):]
			if rest == "" {
				continue
			}
			switch {
			case rest[0] == '{' && !strings.Contains(name, "{"):
				end := strings.LastIndexByte(rest, '}')
				if end < 0 {
					continue
				}
				rest = rest[end+1:]
			case rest[0] != ' ':
				continue // a longer name, or more labels than asked for
			}
			fields := strings.Fields(rest)
			if len(fields) == 0 {
				continue
			}
			if v, err := strconv.ParseFloat(fields[0], 64); err == nil {
				out[name] += v
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read metrics: %w", err)
	}
	return out, nil
}

// FetchSums GETs url and returns Sums of names.
func FetchSums(ctx context.Context, hc *http.Client, url string, names ...string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil, fmt.Errorf("scrape %s: status %d", url, resp.StatusCode)
	}
	return Sums(resp.Body, names...)
}
