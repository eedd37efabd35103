package app

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/turnstile-run/turnstile/pkg/lifecycle"
)

// ShellConfig is what a role puts into its Shell: its parts and the hooks of its shutdown, in the
// manner of net/http's Server.RegisterOnShutdown. Every hook is optional.
type ShellConfig struct {
	// Name is the role's name, in the error of a Start after Stop ("start intake: stopped").
	Name string
	// Parts are the role's background components: Start starts them in order, Stop stops them in
	// reverse (see lifecycle.Group, which names each part in its errors).
	Parts *lifecycle.Group
	// Ready, asked while the role runs, says what it still waits for (the worker, for Kafka);
	// nil means running is ready.
	Ready func() error
	// Drain ends the work the HTTP server's shutdown would otherwise wait for (open streams, whose
	// clients resume elsewhere). Drain and Stop call it, Stop before anything else.
	Drain func(ctx context.Context)
	// Wait waits, within ctx, for the work the role has taken on to end: the handlers of the
	// streams Drain ended, the records a producer buffers. Stop calls it after Drain and before
	// the parts stop.
	Wait func(ctx context.Context) error
	// Close releases what the role's constructor opened (a producer, idle connections). Stop
	// calls it once, after the parts have stopped, also when the role never started: a process
	// whose later role fails to build stops the roles built before it without starting them.
	Close func(ctx context.Context) error
}

// Shell is the start/stop/ready shell of a role, written once: a role embeds it and adds only its
// own parts and hooks (ShellConfig). Start starts the parts and makes the role ready; Ready says
// whether it is; Stop drops readiness, drains, waits, stops the parts and closes, all within its
// context, once. A stopped role does not start again (it has closed what it was built with, or
// ended its streams for good). Shell has the contract of package lifecycle: Start returns at once,
// Stop blocks, both are safe twice and concurrently, and Stop is safe before Start.
type Shell struct {
	cfg   ShellConfig
	ready atomic.Bool

	// life serialises Start and Stop; stopped says Stop has run, stopErr is what it returned.
	life    sync.Mutex
	stopped bool
	stopErr error
}

// NewShell returns the shell of a role that holds no long-lived streams; such a role is not an
// app.Drainer and keeps serving until Stop.
func NewShell(cfg ShellConfig) *Shell {
	if cfg.Parts == nil {
		cfg.Parts = &lifecycle.Group{}
	}
	return &Shell{cfg: cfg}
}

// Start starts the parts in order (see lifecycle.Group: a part that fails to start is stopped with
// the ones before it) and marks the role ready. Start after Stop fails.
func (s *Shell) Start(ctx context.Context) error {
	s.life.Lock()
	defer s.life.Unlock()
	if s.stopped {
		return fmt.Errorf("start %s: stopped", s.cfg.Name)
	}
	if err := s.cfg.Parts.Start(ctx); err != nil {
		return err
	}
	s.ready.Store(true)
	return nil
}

// Ready returns nil while the role runs and is not draining, and ShellConfig.Ready (if any) says
// it is ready; otherwise it says why not.
func (s *Shell) Ready() error {
	if !s.ready.Load() {
		return errors.New("not running")
	}
	if s.cfg.Ready != nil {
		return s.cfg.Ready()
	}
	return nil
}

// Stop drops readiness, runs Drain, Wait, stops the parts in reverse order and runs Close, all
// within ctx, and joins their errors. It runs once: a later Stop returns the first one's error.
// Safe before Start.
func (s *Shell) Stop(ctx context.Context) error {
	s.life.Lock()
	defer s.life.Unlock()
	if s.stopped {
		return s.stopErr
	}
	s.stopped = true
	s.ready.Store(false)
	if s.cfg.Drain != nil {
		s.cfg.Drain(ctx)
	}
	var errs []error
	if s.cfg.Wait != nil {
		errs = append(errs, s.cfg.Wait(ctx))
	}
	errs = append(errs, s.cfg.Parts.Stop(ctx))
	if s.cfg.Close != nil {
		errs = append(errs, s.cfg.Close(ctx))
	}
	s.stopErr = errors.Join(errs...)
	return s.stopErr
}

// StreamShell is the Shell of a role that holds long-lived streams (the gateway, the protocol
// front doors, the router's forwards): it is also an app.Drainer, so the process drains it before
// its HTTP server shuts down.
type StreamShell struct {
	*Shell
}

// NewStreamShell returns the shell of a role with streams; cfg.Drain ends them.
func NewStreamShell(cfg ShellConfig) StreamShell { return StreamShell{NewShell(cfg)} }

// Drain drops readiness and runs ShellConfig.Drain; clients of the ended streams resume on another
// replica.
func (s StreamShell) Drain(ctx context.Context) {
	s.ready.Store(false)
	if s.cfg.Drain != nil {
		s.cfg.Drain(ctx)
	}
}
