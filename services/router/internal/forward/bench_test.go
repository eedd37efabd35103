package forward

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnstile-run/turnstile/pkg/region"
	"github.com/turnstile-run/turnstile/services/router/internal/health"
)

// BenchmarkForwardCost measures what the router adds to a request: each iteration makes one call
// straight to a region and the same call through the router (owner read from the turn ID's
// prefix, health checked, forwarded over a kept-alive connection), both over loopback TCP with
// keep-alive, and reports both latencies' p50 and p99 and the difference. The region answers at
// once with a turn's JSON, so the figures are the forwarding cost alone.
func BenchmarkForwardCost(b *testing.B) {
	body := []byte(`{"turn_id":"euw1-0192f3c4-0000-7000-8000-000000000000","session_id":"s","status":"completed","attempt":1}`)
	regionSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	defer regionSrv.Close()
	m, err := region.Parse(fmt.Appendf(nil, `{"regions": [{"code": "euw1", "url": %q}]}`, regionSrv.URL))
	if err != nil {
		b.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	reg := prometheus.NewRegistry()
	mon := health.New(health.Config{}, []health.Region{{Code: "euw1", URL: regionSrv.URL}}, http.DefaultClient, log, reg)
	fw, err := New(Config{}, m, mon, log, reg)
	if err != nil {
		b.Fatal(err)
	}
	defer fw.Close()
	routerSrv := httptest.NewServer(fw)
	defer routerSrv.Close()

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer client.CloseIdleConnections()
	const path = "/v1/turns/euw1-0192f3c4-0000-7000-8000-000000000000"
	call := func(base string) time.Duration {
		start := time.Now()
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, base+path, nil)
		req.Header.Set("Authorization", "Bearer ts_euw1-3f9a0c1d2e4b_secret")
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d", resp.StatusCode)
		}
		return time.Since(start)
	}
	// Warm both paths' connections so no dial is measured.
	call(regionSrv.URL)
	call(routerSrv.URL)

	direct := make([]time.Duration, 0, b.N)
	routed := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		direct = append(direct, call(regionSrv.URL))
		routed = append(routed, call(routerSrv.URL))
	}
	b.StopTimer()
	d50, d99 := percentiles(direct)
	r50, r99 := percentiles(routed)
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	b.ReportMetric(us(d50), "direct-p50-µs")
	b.ReportMetric(us(d99), "direct-p99-µs")
	b.ReportMetric(us(r50), "router-p50-µs")
	b.ReportMetric(us(r99), "router-p99-µs")
	b.ReportMetric(us(r50-d50), "added-p50-µs")
	b.ReportMetric(us(r99-d99), "added-p99-µs")
	b.ReportMetric(float64(r50)/float64(d50), "p50-ratio")
}

func percentiles(d []time.Duration) (p50, p99 time.Duration) {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)*50/100], s[min(len(s)-1, len(s)*99/100)]
}
