package aisdk

import (
	"context"

	"github.com/go-chi/chi/v5"

	"github.com/turnstile-run/turnstile/pkg/admission"
	"github.com/turnstile-run/turnstile/pkg/app"
	"github.com/turnstile-run/turnstile/pkg/frontdoor"
	"github.com/turnstile-run/turnstile/services/aisdk/internal/chat"
	"github.com/turnstile-run/turnstile/services/aisdk/internal/web"
)

// Role builds the AI SDK front door from shared deps.
var Role = app.Role{Name: "aisdk", New: func(_ context.Context, d *app.Deps) (app.Component, error) { return New(d), nil }}

// AISDK is the running aisdk role. It has no background work: Start marks it ready, Drain and
// Stop cut its streams (each client sees its connection drop and resumes on another replica), so
// the HTTP server's shutdown does not wait for answers that may run for minutes; Stop also waits
// for their handlers within its context. A stopped one does not start again.
type AISDK struct {
	app.StreamShell
	handler *chat.Handler
}

// New builds the role.
func New(d *app.Deps) *AISDK {
	cfg := d.Config
	// Its streams count against the process's one budget, with every other door's.
	fdc := frontdoor.FromConfig(cfg, d.LocalURL())
	fdc.Admission, fdc.Door, fdc.Tenants = d.Admission(), admission.DoorAISDK, cfg.Auth.Enabled()
	fd := frontdoor.New(fdc)
	h := chat.New(chat.Config{KeepAlive: cfg.KeepAlive, MaxBody: cfg.MaxBody}, fd, d.Log.With("role", "aisdk"), d.Registry)
	return &AISDK{handler: h, StreamShell: app.NewStreamShell(app.ShellConfig{
		Name: "aisdk", Drain: h.Drain, Wait: h.Wait,
		Close: func(context.Context) error { fd.CloseIdleConnections(); return nil },
	})}
}

// Routes mounts the chat routes and the useChat page.
func (a *AISDK) Routes(r chi.Router) {
	a.handler.Routes(r)
	web.Routes(r)
}
