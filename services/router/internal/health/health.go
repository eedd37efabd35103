package health

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/lifecycle"
)

// Config tunes a Monitor; zero fields take pkg/config's defaults of the TURNSTILE_ROUTER_PROBE_*
// settings.
type Config struct {
	// Interval between probe rounds. Defaults to config.RouterProbeIntervalDefault.
	Interval time.Duration
	// Timeout bounds one probe, answer included. Defaults to config.RouterProbeTimeoutDefault.
	Timeout time.Duration
	// Rise is how many consecutive good probes bring a down region back. Defaults to config.RouterProbeRiseDefault.
	Rise int
	// Fall is how many consecutive failed probes take an up region down. Defaults to config.RouterProbeFallDefault.
	Fall int
	// Path is probed on each region's URL. Defaults to config.RouterProbePathDefault.
	Path string
	// OnProbe, when set, is called after each probe with its result and the region's state after
	// it (tests wait on it). It must be fast and safe for concurrent use.
	OnProbe func(code string, ok, up bool)
}

func (c *Config) applyDefaults() {
	if c.Interval <= 0 {
		c.Interval = config.RouterProbeIntervalDefault
	}
	if c.Timeout <= 0 {
		c.Timeout = config.RouterProbeTimeoutDefault
	}
	if c.Rise <= 0 {
		c.Rise = config.RouterProbeRiseDefault
	}
	if c.Fall <= 0 {
		c.Fall = config.RouterProbeFallDefault
	}
	if c.Path == "" {
		c.Path = config.RouterProbePathDefault
	}
}

// Region is one probed region: its code and the base URL of its public endpoint.
type Region struct {
	Code string
	URL  string
}

// state is one region's health; Monitor.mu guards it.
type state struct {
	url  string
	up   bool
	good int // consecutive good probes while down
	bad  int // consecutive failed probes while up
}

// Monitor tracks which regions are up. Its methods are safe for concurrent use.
type Monitor struct {
	lifecycle.Runner
	cfg    Config
	client *http.Client
	log    *slog.Logger
	gauge  *prometheus.GaugeVec

	mu      sync.Mutex
	regions map[string]*state
	order   []string
}

// New returns a Monitor of regions, each up until it proves otherwise. client makes the probes
// (the router passes one whose dialer has its connect timeout); its metrics go to reg.
func New(cfg Config, regions []Region, client *http.Client, log *slog.Logger, reg prometheus.Registerer) *Monitor {
	cfg.applyDefaults()
	m := &Monitor{
		cfg: cfg, client: client, log: log, regions: map[string]*state{},
		gauge: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "turnstile_router_region_up",
			Help: "1 while the router considers the region up (probes and forwards succeed), 0 while down.",
		}, []string{"region"}),
	}
	for _, r := range regions {
		m.regions[r.Code] = &state{url: strings.TrimRight(r.URL, "/"), up: true}
		m.order = append(m.order, r.Code)
		m.gauge.WithLabelValues(r.Code).Set(1)
	}
	reg.MustRegister(m.gauge)
	m.Runner = lifecycle.Runner{Name: "region health monitor", Run: m.run}
	return m
}

// Up reports whether the region is up; an unknown region is not.
func (m *Monitor) Up(code string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.regions[code]
	return ok && s.up
}

// Failed marks the region down at once after a forward to it failed to connect or timed out;
// probes bring it back.
func (m *Monitor) Failed(code string, err error) {
	m.mu.Lock()
	s, ok := m.regions[code]
	was := ok && s.up
	if ok {
		s.up, s.good, s.bad = false, 0, 0
	}
	m.mu.Unlock()
	if was {
		m.gauge.WithLabelValues(code).Set(0)
		m.log.Warn("region down: a forward failed", "region", code, "err", err)
	}
}

func (m *Monitor) run(ctx context.Context) {
	lifecycle.Every(ctx, m.cfg.Interval, m.round)
}

// round probes every region at once and waits for every probe.
func (m *Monitor) round(ctx context.Context) {
	var wg sync.WaitGroup
	for _, code := range m.order {
		m.mu.Lock()
		url := m.regions[code].url
		m.mu.Unlock()
		wg.Go(func() {
			err := m.probe(ctx, url)
			if ctx.Err() != nil {
				return // stopping: a cancelled probe says nothing of the region
			}
			m.record(code, err)
		})
	}
	wg.Wait()
}

// probe asks one region whether it is ready: a 200 within Timeout.
func (m *Monitor) probe(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+m.cfg.Path, http.NoBody)
	if err != nil {
		return fmt.Errorf("build probe: %w", err)
	}
	resp, err := m.client.Do(req)
	if err != nil {
		return fmt.Errorf("probe %s: %w", m.cfg.Path, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("probe %s: status %d", m.cfg.Path, resp.StatusCode)
	}
	return nil
}

// record applies one probe's result with the Rise/Fall hysteresis.
func (m *Monitor) record(code string, err error) {
	m.mu.Lock()
	s := m.regions[code]
	was := s.up
	if err == nil {
		s.bad = 0
		if !s.up {
			s.good++
			s.up = s.good >= m.cfg.Rise
		}
	} else {
		s.good = 0
		if s.up {
			s.bad++
			s.up = s.bad < m.cfg.Fall
		}
	}
	up := s.up
	if up != was {
		s.good, s.bad = 0, 0
	}
	m.mu.Unlock()
	switch {
	case up && !was:
		m.gauge.WithLabelValues(code).Set(1)
		m.log.Info("region up", "region", code)
	case !up && was:
		m.gauge.WithLabelValues(code).Set(0)
		m.log.Warn("region down: probes failed", "region", code, "err", err)
	}
	if m.cfg.OnProbe != nil {
		m.cfg.OnProbe(code, err == nil, up)
	}
}
