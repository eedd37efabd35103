package a2a

import (
	"context"
	"net/http"

	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/go-chi/chi/v5"

	"github.com/turnstile-run/turnstile/pkg/admission"
	"github.com/turnstile-run/turnstile/pkg/agents"
	"github.com/turnstile-run/turnstile/pkg/app"
	"github.com/turnstile-run/turnstile/pkg/frontdoor"
	"github.com/turnstile-run/turnstile/pkg/lifecycle"
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
	// agents is the process's catalog (pkg/agents), read at each request to an agent's path.
	agents *agents.Watcher
	// cardFor builds the card of a catalog agent.
	cardFor func(agents.Agent) *rpc.CardHandler
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
	catalog, err := d.Agents()
	if err != nil {
		return nil, err
	}
	return &Server{
		agents: catalog,
		cardFor: func(a agents.Agent) *rpc.CardHandler {
			path := rpc.AgentPath(a.Name)
			return rpc.NewCardHandler(card.ForAgent(cfg.A2A, cfg.Auth.Enabled(), path, a), path, proxies)
		},
		StreamShell: app.NewStreamShell(app.ShellConfig{
			Name: "a2a", Drain: h.Drain, Wait: h.Wait,
			Close: func(context.Context) error { fd.CloseIdleConnections(); return nil },
			// The catalog reloads while the role runs (its Start and Stop are safe twice).
			Parts: new(lifecycle.Group).Add("agents catalog", catalog),
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
// binding (1.0) and the Agent Card of the default agent at the root paths, and the same three of
// every catalog agent under /a2a/{agent} (rpc.AgentPath). An agent's paths follow the catalog as
// it reloads; an agent it does not hold is answered 404 (rpc.Server.NoAgent) before anything of
// the request is read.
func (s *Server) Routes(r chi.Router) {
	r.Handle(rpc.Path, s.rpc)
	r.Handle(rpc.RESTPath+"/*", s.rpc.REST(rpc.RESTPath))
	r.Handle(a2asrv.WellKnownAgentCardPath, s.card)
	r.Handle(rpc.Path+"/{agent}", s.forAgent(func(string) http.Handler { return s.rpc }))
	r.Handle(rpc.Path+"/{agent}/rest/*", s.forAgent(func(name string) http.Handler { return s.rpc.REST(rpc.AgentPath(name) + "/rest") }))
	r.Handle(rpc.Path+"/{agent}"+a2asrv.WellKnownAgentCardPath, s.forAgent(nil))
}

// forAgent serves the route's agent with the handler next builds for it (its card when next is nil).
func (s *Server) forAgent(next func(name string) http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := chi.URLParam(r, "agent")
		a, ok := s.agents.Catalog().Get(name)
		if !ok || name == "" {
			s.rpc.NoAgent(w, r, name)
			return
		}
		if next == nil {
			s.cardFor(a).ServeHTTP(w, r)
			return
		}
		next(a.Name).ServeHTTP(w, r.WithContext(rpc.WithAgent(r.Context(), a.Name)))
	})
}

// Streams counts open A2A streams.
func (s *Server) Streams() int { return s.handler.Len() }
