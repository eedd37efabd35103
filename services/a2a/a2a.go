package a2a

import (
	"context"

	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/go-chi/chi/v5"

	"github.com/turnstile-run/turnstile/pkg/admission"
	"github.com/turnstile-run/turnstile/pkg/app"
	"github.com/turnstile-run/turnstile/pkg/frontdoor"
	"github.com/turnstile-run/turnstile/services/a2a/internal/card"
	"github.com/turnstile-run/turnstile/services/a2a/internal/rpc"
	"github.com/turnstile-run/turnstile/services/a2a/internal/tasks"
)

// Role builds the A2A front door from shared deps.
var Role = app.Role{Name: "a2a", New: func(_ context.Context, d *app.Deps) (app.Component, error) { return New(d) }}

// Server is the running A2A role. It has nothing to open: Start marks it ready; Drain ends every
// open stream (clients resubscribe with their last event id), and Stop also waits for their
// handlers, within its context. A stopped one does not start again.
type Server struct {
	app.StreamShell
	handler *tasks.Handler
	rpc     *rpc.Server
	card    *rpc.CardHandler
}

// New builds the role. It connects to nothing until a request comes.
func New(d *app.Deps) (*Server, error) {
	cfg := d.Config
	log := d.Log.With("role", "a2a")
	place, err := cfg.Region.Local()
	if err != nil {
		return nil, err
	}
	proxies, err := cfg.TrustedProxyList()
	if err != nil {
		return nil, err
	}
	// Its streams count against the process's one budget, with every other door's.
	fdc := frontdoor.FromConfig(cfg, d.LocalURL())
	fdc.Admission, fdc.Door, fdc.Tenants = d.Admission(), admission.DoorA2A, cfg.Auth.Enabled()
	fd := frontdoor.New(fdc)
	h := tasks.New(fd, tasks.Config{MaxBlock: cfg.A2A.MaxBlock, Region: cfg.Region.Code}, log)
	return &Server{
		StreamShell: app.NewStreamShell(app.ShellConfig{
			Name: "a2a", Drain: h.Drain, Wait: h.Wait,
			Close: func(context.Context) error { fd.CloseIdleConnections(); return nil },
		}),
		handler: h,
		rpc: rpc.New(rpc.Config{
			MaxBody: cfg.MaxBody, KeepAlive: cfg.KeepAlive, WriteTimeout: cfg.Gateway.WriteTimeout, Region: place,
			Auth: cfg.Auth.Enabled(), CORSOrigins: cfg.A2A.CORSOriginList(),
		}, h, fd, d.Registry),
		card: rpc.NewCardHandler(card.New(cfg.A2A, cfg.Auth.Enabled(), rpc.Path), rpc.Path, proxies),
	}, nil
}

// Routes mounts the JSON-RPC endpoint (protocol 0.3 and 1.0, by A2A-Version), the HTTP+JSON
// binding (1.0) and the Agent Card.
func (s *Server) Routes(r chi.Router) {
	r.Handle(rpc.Path, s.rpc)
	r.Handle(rpc.RESTPath+"/*", s.rpc.REST(rpc.RESTPath))
	r.Handle(a2asrv.WellKnownAgentCardPath, s.card)
}

// Streams counts open A2A streams.
func (s *Server) Streams() int { return s.handler.Len() }
