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
