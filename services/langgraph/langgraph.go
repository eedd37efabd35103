package langgraph

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/turnstile-run/turnstile/pkg/app"
	"github.com/turnstile-run/turnstile/pkg/frontdoor"
	"github.com/turnstile-run/turnstile/pkg/postgres"
	"github.com/turnstile-run/turnstile/services/langgraph/internal/api"
	"github.com/turnstile-run/turnstile/services/langgraph/internal/web"
)

// Role builds the langgraph role from shared deps.
var Role = app.Role{Name: "langgraph", New: func(ctx context.Context, d *app.Deps) (app.Component, error) { return New(ctx, d) }}

// LangGraph is the running role. A stopped one has ended its streams for good.
type LangGraph struct {
	handler *api.Handler
	// ownPool is the pool the role made itself when Postgres was down at start; Stop closes it.
	ownPool *pgxpool.Pool
	ready   atomic.Bool

	life    sync.Mutex
	stopped bool
}

// New builds the role; ctx bounds the first connection to Postgres, which holds the thread table
// and may be down (the pool then connects when Postgres answers, and thread routes answer 503
// until it does).
func New(ctx context.Context, d *app.Deps) (*LangGraph, error) {
	cfg := d.Config
	log := d.Log.With("role", "langgraph")
	place, err := cfg.Region.Local()
	if err != nil {
		return nil, err
	}
	var ownPool *pgxpool.Pool
	pool, err := d.Postgres(ctx)
	if err != nil {
		log.Warn("postgres unavailable at start; thread routes answer 503 until it answers", "err", err)
		if pool, err = postgres.NewLazyPool(ctx, cfg.DatabaseURL, cfg.DatabaseSchema); err != nil {
			return nil, err
		}
		ownPool = pool
	}
	fd := frontdoor.New(frontdoor.FromConfig(cfg, d.LocalURL()))
	h := api.New(api.Config{
		Assistants: cfg.LangGraph.AssistantList(), Auth: cfg.Auth.Enabled(),
		KeepAlive: cfg.KeepAlive, MaxBody: cfg.MaxBody, RetryAfter: cfg.Intake.RetryAfter,
		Region: place,
	}, fd, pool, log, d.Registry)
	return &LangGraph{handler: h, ownPool: ownPool}, nil
}

// Routes mounts LangGraph's paths and the useStream demo page.
func (l *LangGraph) Routes(r chi.Router) {
	l.handler.Routes(r)
	web.Routes(r)
}

// Start makes the role ready; it has no background work of its own. Start after Stop fails.
func (l *LangGraph) Start(context.Context) error {
	l.life.Lock()
	defer l.life.Unlock()
	if l.stopped {
		return errors.New("start langgraph: stopped")
	}
	l.ready.Store(true)
	return nil
}

// Ready returns nil until draining begins.
func (l *LangGraph) Ready() error {
	if !l.ready.Load() {
		return errors.New("not running")
	}
	return nil
}

// Drain drops readiness and ends every open run stream without an end event, so each client
// rejoins (with Last-Event-ID) on another replica.
func (l *LangGraph) Drain(ctx context.Context) {
	l.ready.Store(false)
	l.handler.Drain(ctx)
	_ = l.handler.Wait(ctx)
}

// CutStreams ends every open run stream without an end event while the role keeps serving, so
// clients rejoin here with Last-Event-ID. Tests use it to cut connections mid-run.
func (l *LangGraph) CutStreams() { l.handler.Cut() }

// Stop ends every stream and waits for them within ctx. Safe twice and before Start.
func (l *LangGraph) Stop(ctx context.Context) error {
	l.life.Lock()
	defer l.life.Unlock()
	l.stopped = true
	l.ready.Store(false)
	l.handler.Drain(ctx)
	_ = l.handler.Wait(ctx)
	if l.ownPool != nil {
		l.ownPool.Close()
	}
	return ctx.Err()
}
