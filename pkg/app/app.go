package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/pkg/lifecycle"
	"github.com/turnstile-run/turnstile/pkg/logging"
	"github.com/turnstile-run/turnstile/pkg/telemetry"
)

// Stack is a running set of roles with their HTTP server.
type Stack struct {
	deps *Deps
	// components are the built roles in start order; roles starts and stops them.
	components []named
	roles      lifecycle.Group
	server     *http.Server
	listener   net.Listener
	serveDone  chan error
	// pprof serves net/http/pprof when config.Config.PprofAddr is set; nil otherwise.
	pprof    *pprofServer
	draining atomic.Bool
	stopped  atomic.Bool
}

type named struct {
	name string
	c    Component
}

// Start builds the roles of cfg.Roles from the available ones, then starts them in the order given
// by available (broker first) and serves HTTP on cfg.HTTPAddr. On error everything built is stopped
// (a role that failed to start included, since it may have started parts of itself) and the deps
// close.
func Start(ctx context.Context, deps *Deps, available []Role) (*Stack, error) {
	s := &Stack{deps: deps, serveDone: make(chan error, 1)}
	ctx = telemetry.WithProvider(ctx, deps.Tracing)
	// Listen before the roles are built, so a role that calls the process's own API (a protocol
	// front door in one process with intake and the gateway) knows its address (Deps.LocalURL).
	// Connections wait in the listen queue until Serve starts.
	ln, err := net.Listen("tcp", deps.Config.HTTPAddr)
	if err != nil {
		deps.Close() //nolint:contextcheck // Close bounds its own work (a 5 s trace flush)
		return nil, fmt.Errorf("listen on TURNSTILE_HTTP_ADDR %s: %w", deps.Config.HTTPAddr, err)
	}
	s.listener = ln
	deps.localURL = "http://" + ln.Addr().String()
	r := chi.NewRouter()
	r.NotFound(httpx.NotFound)
	r.MethodNotAllowed(httpx.MethodNotAllowed)
	for _, role := range available {
		if !deps.Config.HasRole(role.Name) {
			continue
		}
		c, err := role.New(ctx, deps)
		if err != nil {
			return nil, s.abortBuild(ctx, fmt.Errorf("build role %s: %w", role.Name, err))
		}
		s.components = append(s.components, named{role.Name, c})
		s.roles.Add("role "+role.Name, loggedRole{role.Name, c, deps.Log})
		if rt, ok := c.(Router); ok {
			rt.Routes(r)
		}
	}
	if err := s.roles.Start(ctx); err != nil {
		_ = ln.Close()
		// The group has stopped what it started, the failed role included.
		deps.Close() //nolint:contextcheck // Close bounds its own work (a 5 s trace flush), so it runs even after ctx ended
		return nil, err
	}
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		httpx.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	r.Get("/readyz", s.readyz)
	r.Handle("/metrics", promhttp.HandlerFor(deps.Registry, promhttp.HandlerOpts{Registry: deps.Registry}))

	if deps.Config.PprofAddr != "" {
		if s.pprof, err = startPprof(deps.Config.PprofAddr); err != nil {
			_ = ln.Close()
			_ = s.roles.Stop(context.WithoutCancel(ctx))
			deps.Close() //nolint:contextcheck // Close bounds its own work (a 5 s trace flush), so it runs even after ctx ended
			return nil, err
		}
		deps.Log.Info("serving pprof", "addr", s.pprof.addr)
	}
	s.server = httpx.NewServer(deps.Config.HTTPAddr, r)
	s.server.BaseContext = func(net.Listener) context.Context { return context.WithoutCancel(ctx) }
	go func() {
		err := s.server.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		s.serveDone <- err
	}()
	deps.Log.Info("serving http", "addr", ln.Addr().String(), "roles", deps.Config.RoleList())
	return s, nil
}

// Addr is the address the HTTP server listens on.
func (s *Stack) Addr() string { return s.listener.Addr().String() }

// PprofAddr is the address net/http/pprof is served on (config.Config.PprofAddr), or "" when it
// is not.
func (s *Stack) PprofAddr() string {
	if s.pprof == nil {
		return ""
	}
	return s.pprof.addr
}

// Component returns the running component of a role, or nil.
func (s *Stack) Component(role string) Component {
	for _, n := range s.components {
		if n.name == role {
			return n.c
		}
	}
	return nil
}

func (s *Stack) readyz(w http.ResponseWriter, _ *http.Request) {
	notReady := []string{}
	reasons := map[string]string{}
	if s.draining.Load() {
		notReady = append(notReady, "draining")
	}
	for _, n := range s.components {
		if rd, ok := n.c.(Readier); ok {
			if err := rd.Ready(); err != nil {
				notReady = append(notReady, n.name)
				reasons[n.name] = err.Error()
			}
		}
	}
	if len(notReady) > 0 {
		httpx.WriteJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "not ready", "not_ready": notReady, "reasons": reasons})
		return
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// Stop drains and stops everything within ctx: readiness goes false, drainers drain, the HTTP server
// finishes in-flight requests, then components stop in reverse start order (so the embedded broker
// outlives the worker that commits offsets to it). Safe to call twice.
func (s *Stack) Stop(ctx context.Context) error {
	if !s.stopped.CompareAndSwap(false, true) {
		return nil
	}
	s.draining.Store(true)
	for _, n := range s.components {
		if d, ok := n.c.(Drainer); ok {
			d.Drain(ctx)
		}
	}
	var errs []error
	if err := s.server.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("shut down http server: %w", err))
		_ = s.server.Close()
	}
	if err := <-s.serveDone; err != nil {
		errs = append(errs, fmt.Errorf("serve http: %w", err))
	}
	if s.pprof != nil {
		if err := s.pprof.stop(); err != nil {
			errs = append(errs, fmt.Errorf("serve pprof: %w", err))
		}
	}
	errs = append(errs, s.roles.Stop(ctx))
	s.deps.Close() //nolint:contextcheck // Close bounds its own work (a 5 s trace flush), so it runs even after ctx ended
	return errors.Join(errs...)
}

// abortBuild undoes a Start whose role failed to build: the roles built so far never started, but
// may hold what their constructors opened (intake's producer), which their Stop releases.
func (s *Stack) abortBuild(ctx context.Context, err error) error {
	_ = s.listener.Close()
	ctx = context.WithoutCancel(ctx)
	for i := len(s.components) - 1; i >= 0; i-- {
		if serr := s.components[i].c.Stop(ctx); serr != nil {
			err = errors.Join(err, fmt.Errorf("stop role %s: %w", s.components[i].name, serr))
		}
	}
	s.deps.Close() //nolint:contextcheck // Close bounds its own work (a 5 s trace flush), so it runs even after ctx ended
	return err
}

// loggedRole logs a role's start and stop.
type loggedRole struct {
	name string
	c    Component
	log  *slog.Logger
}

func (l loggedRole) Start(ctx context.Context) error {
	if err := l.c.Start(ctx); err != nil {
		return err
	}
	l.log.Info("role started", "role", l.name)
	return nil
}

func (l loggedRole) Stop(ctx context.Context) error {
	err := l.c.Stop(ctx)
	if err != nil {
		err = fmt.Errorf("stop role %s: %w", l.name, err)
	}
	l.log.Info("role stopped", "role", l.name)
	return err
}

// Main is the whole of a turnstile binary's main: it reads the configuration, runs a subcommand
// (`migrate`, or one of the available roles' Commands) or the roles, and exits non-zero on failure. defaultRoles applies when
// TURNSTILE_ROLES is unset.
func Main(defaultRoles string, available []Role) {
	os.Exit(run(os.Args, os.Stdout, defaultRoles, available))
}

// run is Main's body over the process's arguments (args[0] the binary's name) and standard output;
// it returns the exit code so that its deferred calls run before the exit.
func run(args []string, stdout io.Writer, defaultRoles string, available []Role) int {
	// Help and version need no configuration.
	if ok, err := builtin(args, stdout, defaultRoles, available); ok {
		if err != nil {
			return 1
		}
		return 0
	}
	if os.Getenv("TURNSTILE_ROLES") == "" {
		_ = os.Setenv("TURNSTILE_ROLES", defaultRoles)
	}
	cfg, err := config.Load()
	if err == nil {
		err = cfg.Validate()
	}
	log := logging.New(os.Stderr, cfg.LogFormat, cfg.LogLevel)
	if err != nil {
		log.Error("invalid configuration", "err", err)
		return 2
	}
	slog.SetDefault(log)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(args) > 1 {
		if err := runCommand(ctx, CommandEnv{Config: cfg, Log: log, Stdout: stdout}, available, args[1:]); err != nil {
			log.Error("command failed", "command", args[1], "err", err)
			return 1
		}
		return 0
	}
	stack, err := Start(ctx, NewDeps(cfg, log), available)
	if err != nil {
		log.Error("start failed", "err", err)
		return 1
	}
	select {
	case <-ctx.Done():
		log.Info("signal received, shutting down", "timeout", cfg.ShutdownTimeout)
	case err := <-stack.serveDone:
		log.Error("http server ended", "err", err)
		stack.serveDone <- err
	}
	stop()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := stack.Stop(shutdownCtx); err != nil {
		log.Error("shutdown incomplete", "err", err)
		return 1
	}
	log.Info("stopped cleanly")
	return 0
}
