package aisdk

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/go-chi/chi/v5"

	"github.com/turnstile-run/turnstile/pkg/app"
	"github.com/turnstile-run/turnstile/pkg/frontdoor"
	"github.com/turnstile-run/turnstile/services/aisdk/internal/chat"
	"github.com/turnstile-run/turnstile/services/aisdk/internal/web"
)

// Role builds the AI SDK front door from shared deps.
var Role = app.Role{Name: "aisdk", New: func(_ context.Context, d *app.Deps) (app.Component, error) { return New(d), nil }}

// AISDK is the running aisdk role. It has no background work: Start marks it ready, Drain and
// Stop end its streams (each client sees its connection drop and resumes on another replica).
type AISDK struct {
	handler *chat.Handler
	fd      *frontdoor.Client
	ready   atomic.Bool

	life    sync.Mutex
	stopped bool
}

// New builds the role.
func New(d *app.Deps) *AISDK {
	cfg := d.Config
	fd := frontdoor.New(frontdoor.FromConfig(cfg, d.LocalURL()))
	h := chat.New(chat.Config{KeepAlive: cfg.KeepAlive, MaxBody: cfg.MaxBody}, fd, d.Log.With("role", "aisdk"), d.Registry)
	return &AISDK{handler: h, fd: fd}
}

// Routes mounts the chat routes and the useChat page.
func (a *AISDK) Routes(r chi.Router) {
	a.handler.Routes(r)
	web.Routes(r)
}

// Start marks the role ready. Start after Stop fails.
func (a *AISDK) Start(context.Context) error {
	a.life.Lock()
	defer a.life.Unlock()
	if a.stopped {
		return errors.New("start aisdk: stopped")
	}
	a.ready.Store(true)
	return nil
}

// Ready returns nil until draining begins.
func (a *AISDK) Ready() error {
	if !a.ready.Load() {
		return errors.New("not running")
	}
	return nil
}

// Drain drops readiness and cuts every open stream, so the HTTP server's shutdown does not wait
// for answers that may run for minutes; their clients resume elsewhere.
func (a *AISDK) Drain(ctx context.Context) {
	a.ready.Store(false)
	a.handler.Drain(ctx)
}

// Stop cuts every stream and waits for their handlers within ctx. Safe twice and before Start.
func (a *AISDK) Stop(ctx context.Context) error {
	a.life.Lock()
	defer a.life.Unlock()
	a.stopped = true
	a.ready.Store(false)
	a.handler.Drain(ctx)
	err := a.handler.Wait(ctx)
	a.fd.CloseIdleConnections()
	return err
}
