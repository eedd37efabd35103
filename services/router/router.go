package router

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/go-chi/chi/v5"

	"github.com/turnstile-run/turnstile/pkg/app"
	"github.com/turnstile-run/turnstile/services/router/internal/forward"
	"github.com/turnstile-run/turnstile/services/router/internal/health"
)

// Role builds the router from shared deps.
var Role = app.Role{Name: "router", New: func(_ context.Context, d *app.Deps) (app.Component, error) { return New(d) }}

// Router is the running router role: the health monitor of the map's regions and the handler
// that forwards every request to its owner.
type Router struct {
	health *health.Monitor
	fw     *forward.Handler
	probes *http.Transport
	ready  atomic.Bool

	life    sync.Mutex
	stopped bool
}

// New builds the role from the region map (TURNSTILE_REGIONS_FILE or TURNSTILE_REGIONS), which it
// requires.
func New(d *app.Deps) (*Router, error) {
	cfg := d.Config
	m, err := cfg.Region.RegionMap()
	if err != nil {
		return nil, fmt.Errorf("router: %w", err)
	}
	if m == nil {
		return nil, errors.New("router: no region map: set TURNSTILE_REGIONS_FILE or TURNSTILE_REGIONS")
	}
	log := d.Log.With("role", "router")
	rc := cfg.Router
	probes := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: rc.ConnectTimeout}).DialContext,
		MaxIdleConnsPerHost: 2,
		IdleConnTimeout:     3 * rc.ProbeInterval,
	}
	regions := make([]health.Region, 0, len(m.Regions))
	for _, r := range m.Regions {
		regions = append(regions, health.Region{Code: r.Code, URL: r.URL})
	}
	mon := health.New(health.Config{
		Interval: rc.ProbeInterval, Timeout: rc.ProbeTimeout, Rise: rc.ProbeRise, Fall: rc.ProbeFall, Path: rc.ProbePath,
	}, regions, &http.Client{Transport: probes}, log, d.Registry)
	fw, err := forward.New(forward.Config{
		ConnectTimeout: rc.ConnectTimeout, RetryAfter: rc.RetryAfter, IdleConns: rc.IdleConns, MaxBody: cfg.MaxBody,
	}, m, mon, log, d.Registry)
	if err != nil {
		return nil, fmt.Errorf("router: %w", err)
	}
	return &Router{health: mon, fw: fw, probes: probes}, nil
}

// Routes forwards every path; the process's own /healthz, /readyz and /metrics, mounted after it
// on exact paths, take precedence.
func (r *Router) Routes(rt chi.Router) { rt.Handle("/*", r.fw) }

// Start starts the probes and marks the role ready. Start after Stop fails.
func (r *Router) Start(ctx context.Context) error {
	r.life.Lock()
	defer r.life.Unlock()
	if r.stopped {
		return errors.New("start router: stopped")
	}
	if err := r.health.Start(ctx); err != nil {
		return fmt.Errorf("start router: %w", err)
	}
	r.ready.Store(true)
	return nil
}

// Ready returns nil until draining begins. Regions being down does not make the router unready:
// it still answers their requests, with 503s naming them.
func (r *Router) Ready() error {
	if !r.ready.Load() {
		return errors.New("not running")
	}
	return nil
}

// Drain drops readiness and ends every forward in flight, so the HTTP server's shutdown does not
// wait for streams that may run for hours; their clients reconnect to another replica and resume.
func (r *Router) Drain(context.Context) {
	r.ready.Store(false)
	r.fw.Close()
}

// Stop ends every forward and the probes within ctx. Safe twice and before Start.
func (r *Router) Stop(ctx context.Context) error {
	r.life.Lock()
	defer r.life.Unlock()
	r.stopped = true
	r.ready.Store(false)
	r.fw.Close()
	err := r.health.Stop(ctx)
	r.probes.CloseIdleConnections()
	return err
}
