package router

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/turnstile-run/turnstile/pkg/app"
	"github.com/turnstile-run/turnstile/pkg/lifecycle"
	"github.com/turnstile-run/turnstile/services/router/internal/forward"
	"github.com/turnstile-run/turnstile/services/router/internal/health"
)

// Role builds the router from shared deps.
var Role = app.Role{Name: "router", New: func(_ context.Context, d *app.Deps) (app.Component, error) { return New(d) }}

// Router is the running router role: the health monitor of the map's regions, which its shell
// starts, and the handler that forwards every request to its owner. Regions being down does not
// make the router unready: it still answers their requests, with 503s naming them. Drain and Stop
// end every forward in flight, so the HTTP server's shutdown does not wait for streams that may
// run for hours (their clients reconnect to another replica and resume). A stopped router does
// not start again.
type Router struct {
	app.StreamShell
	fw *forward.Handler
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
	var parts lifecycle.Group
	parts.Add("region probes", mon)
	return &Router{fw: fw, StreamShell: app.NewStreamShell(app.ShellConfig{
		Name: "router", Parts: &parts, Drain: func(context.Context) { fw.Close() },
		Close: func(context.Context) error { probes.CloseIdleConnections(); return nil },
	})}, nil
}

// Routes forwards every path; the process's own /healthz, /readyz and /metrics, mounted after it
// on exact paths, take precedence.
func (r *Router) Routes(rt chi.Router) { rt.Handle("/*", r.fw) }
