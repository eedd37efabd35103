package gateway

import (
	"context"
	"sync/atomic"

	"github.com/go-chi/chi/v5"

	"github.com/turnstile-run/turnstile/pkg/app"
	"github.com/turnstile-run/turnstile/pkg/streams"
	"github.com/turnstile-run/turnstile/services/gateway/internal/hub"
	"github.com/turnstile-run/turnstile/services/gateway/internal/sse"
)

// Role builds the gateway from shared deps.
var Role = app.Role{Name: "gateway", New: func(_ context.Context, d *app.Deps) (app.Component, error) { return New(d) }}

// Gateway is the running gateway role.
type Gateway struct {
	hub     *hub.Hub
	handler *sse.Handler
	ready   atomic.Bool
}

// New builds the gateway.
func New(d *app.Deps) (*Gateway, error) {
	cfg := d.Config
	log := d.Log.With("role", "gateway")
	rdb, err := d.Redis()
	if err != nil {
		return nil, err
	}
	reader := streams.NewReader(rdb, cfg.KeyPrefix)
	h := hub.New(hub.Config{}, rdb, reader, log)
	return &Gateway{hub: h, handler: sse.New(sse.Config{KeepAlive: cfg.KeepAlive}, h, reader, rdb, log, d.Registry)}, nil
}

// Routes mounts the SSE endpoint.
func (g *Gateway) Routes(r chi.Router) { g.handler.Routes(r) }

// Start opens the shared Redis subscription.
func (g *Gateway) Start(ctx context.Context) error {
	if err := g.hub.Start(ctx); err != nil {
		return err
	}
	g.ready.Store(true)
	return nil
}

// Ready is false once draining began.
func (g *Gateway) Ready() bool { return g.ready.Load() }

// Drain drops readiness and closes every stream with a retry hint.
func (g *Gateway) Drain(context.Context) {
	g.ready.Store(false)
	g.handler.Drain()
}

// Connections counts open SSE streams.
func (g *Gateway) Connections() int { return g.handler.Connections() }

// Stop closes the hub. Safe twice.
func (g *Gateway) Stop(ctx context.Context) error {
	g.ready.Store(false)
	g.handler.Drain()
	return g.hub.Stop(ctx)
}
