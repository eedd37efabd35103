package gateway

import (
	"context"
	"fmt"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnstile-run/turnstile/pkg/apikey"
	"github.com/turnstile-run/turnstile/pkg/app"
	"github.com/turnstile-run/turnstile/pkg/lifecycle"
	"github.com/turnstile-run/turnstile/pkg/streams"
	"github.com/turnstile-run/turnstile/pkg/streamtoken"
	"github.com/turnstile-run/turnstile/services/gateway/internal/hub"
	"github.com/turnstile-run/turnstile/services/gateway/internal/revoke"
	"github.com/turnstile-run/turnstile/services/gateway/internal/sse"
	"github.com/turnstile-run/turnstile/services/gateway/internal/web"
)

// Role builds the gateway from shared deps.
var Role = app.Role{Name: "gateway", New: func(ctx context.Context, d *app.Deps) (app.Component, error) { return NewContext(ctx, d) }}

// Gateway is the running gateway role: its shell (app.StreamShell) starts the hub and, with auth
// on, the revocation watcher, in that order. A stopped gateway has drained its stream handler for
// good and does not start again.
type Gateway struct {
	app.StreamShell
	handler *sse.Handler
}

// OpenInfo re-exports what the stream handler reports when a stream opens, for tests of the
// composed process.
type OpenInfo = sse.OpenInfo

// Hooks re-exports the stream handler's hooks for tests of the composed process.
type Hooks = sse.Hooks

// New builds the gateway.
func New(d *app.Deps) (*Gateway, error) { return NewContext(context.Background(), d) }

// NewContext builds the gateway; ctx bounds the connection to Postgres, which only the revocation
// watcher uses and which may be down (the pool then connects when Postgres answers).
func NewContext(ctx context.Context, d *app.Deps) (*Gateway, error) {
	cfg := d.Config
	log := d.Log.With("role", "gateway")
	place, err := cfg.Region.Local()
	if err != nil {
		return nil, err
	}
	rdb, err := d.Redis()
	if err != nil {
		return nil, err
	}
	var (
		tokens  *streamtoken.Signer
		revoked *revoke.Watcher
	)
	if cfg.Auth.Enabled() {
		keys, err := cfg.Auth.Keys()
		if err != nil {
			return nil, err
		}
		if len(keys) == 0 {
			return nil, fmt.Errorf("TURNSTILE_AUTH=on needs TURNSTILE_STREAM_TOKEN_KEYS")
		}
		tokens = streamtoken.New(streamtoken.Options{Keys: keys, TTL: cfg.Auth.StreamTokenTTL})
		pool, err := d.PostgresOrLazy(ctx, log, "revoked API keys reach open streams once it answers")
		if err != nil {
			return nil, err
		}
		revoked = revoke.New(revoke.Config{Window: cfg.Auth.StreamTokenTTL},
			revoke.SourceFunc(func(ctx context.Context, window time.Duration) ([]string, error) {
				return apikey.RevokedWithin(ctx, pool, window)
			}), log)
	} else {
		log.Warn("STREAM TOKENS ARE NOT CHECKED: TURNSTILE_AUTH=off lets anyone read any session's stream; development only")
	}
	reader := streams.NewReader(rdb, cfg.KeyPrefix)
	h := hub.New(hub.Config{Buffer: cfg.Gateway.Buffer}, rdb, reader, log)
	gs := cfg.Gateway
	handler := sse.New(sse.Config{
		KeepAlive: cfg.KeepAlive, Retry: gs.Retry, OverloadRetry: gs.OverloadRetry,
		MaxConnections: gs.MaxConnections, MaxPerSession: gs.MaxPerSession, MaxTenantShare: gs.MaxTenantShare,
		DrainBatch: gs.DrainBatch, DrainInterval: gs.DrainInterval, WriteTimeout: gs.WriteTimeout,
		CORSOrigins: gs.CORSOriginList(), Tokens: tokens, Revocations: revoked, Region: place,
		Admission: d.Admission(),
	}, h, reader, log, d.Registry)
	d.Registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "turnstile_gateway_redis_pool_connections",
			Help: "Connections in the process's Redis command pool (the gateway's Pub/Sub connection is one more).",
		},
			func() float64 { return float64(rdb.PoolStats().TotalConns) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "turnstile_gateway_sessions",
			Help: "Sessions with local streams, each read by one shared feed.",
		},
			func() float64 { return float64(h.Sessions()) }),
	)
	var parts lifecycle.Group
	parts.Add("stream hub", h)
	if revoked != nil {
		parts.Add("revocation watcher", revoked)
	}
	// Start opens the shared Redis subscription and starts reading revoked API keys; Stop closes
	// every stream, waits for them to end, then closes the hub.
	return &Gateway{handler: handler, StreamShell: app.NewStreamShell(app.ShellConfig{
		Name: "gateway", Parts: &parts, Drain: handler.Drain, Wait: handler.Wait,
	})}, nil
}

// Routes mounts the SSE endpoint and the demo chat page.
func (g *Gateway) Routes(r chi.Router) {
	g.handler.Routes(r)
	web.Routes(r)
}

// Connections counts open SSE streams.
func (g *Gateway) Connections() int { return g.handler.Connections() }

// CutStreams closes every open stream with a retry hint without draining, so clients reconnect
// to this replica and resume. Tests use it to cut connections mid-turn.
func (g *Gateway) CutStreams() { g.handler.Cut() }

// SetHooks installs stream hooks (tests).
func (g *Gateway) SetHooks(h *Hooks) { g.handler.SetHooks(h) }
