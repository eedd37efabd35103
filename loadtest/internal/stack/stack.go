package stack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/turnstile-run/turnstile/cmd/turnstile/roles"
	"github.com/turnstile-run/turnstile/pkg/app"
	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/kafka"
	"github.com/turnstile-run/turnstile/pkg/lifecycle"
)

// Stack is an in-process turnstile.
type Stack struct {
	Config config.Config
	// URL is the base URL of the HTTP server (intake and gateway routes, /metrics).
	URL string
	// Pool reaches the stack's schema.
	Pool *pgxpool.Pool

	log *slog.Logger
	// parts are the embedded broker (when there is one) and the main process, in start order.
	parts lifecycle.Group
	// workers are the StartWorker processes, in start order; Stop stops them first, newest first.
	workers []*Process
	// workerMetrics are the registries of the StartWorker processes, in start order.
	workerMetrics []*prometheus.Registry
}

// Start runs the broker and the given roles (a comma list of intake, worker, gateway) with cfg.
// cfg.DatabaseSchema and cfg.KeyPrefix should name a fresh schema and prefix: Stop deletes them.
// On error, what started is stopped.
func Start(ctx context.Context, cfg config.Config, rolesList string, log *slog.Logger) (*Stack, error) {
	s := &Stack{log: log}
	var broker *kafka.Broker
	if cfg.KafkaBrokers == "" || cfg.KafkaBrokers == config.KafkaBrokersDefault {
		broker = kafka.NewBroker(log.With("role", "broker"), "127.0.0.1:0", 1, int32(cfg.Partitions), cfg.Topic, cfg.DLQTopic)
		if err := broker.Start(ctx); err != nil {
			return nil, fmt.Errorf("start embedded broker: %w", err)
		}
		// Started here, ahead of the group (whose Start then finds it running), because the other
		// roles' configuration needs its address.
		s.parts.Add("embedded broker", broker)
		cfg.KafkaBrokers = strings.Join(broker.Addrs(), ",")
	}
	cfg.Roles = rolesList
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.Migrate = "auto"
	s.Config = cfg
	deps := app.NewDeps(cfg, log) //nolint:contextcheck // dependencies outlive this call; Stop closes them
	pool, err := deps.Postgres(ctx)
	if err != nil {
		deps.Close() //nolint:contextcheck // Close bounds its own work
		if broker != nil {
			_ = broker.Stop(context.WithoutCancel(ctx))
		}
		return nil, fmt.Errorf("connect to postgres: %w", err)
	}
	main := NewProcess(deps)
	s.parts.Add("main process", main)
	// The broker is running already; the group starts the main process after it and, if that
	// fails, stops both.
	if err := s.parts.Start(ctx); err != nil {
		return nil, err
	}
	s.Pool, s.URL = pool, main.URL()
	return s, nil
}

// StartWorker adds a worker-only process over the same broker, schema and prefix.
func (s *Stack) StartWorker(ctx context.Context, instance string) error {
	cfg := s.Config
	cfg.Roles, cfg.HTTPAddr, cfg.InstanceID = "worker", "127.0.0.1:0", instance
	deps := app.NewDeps(cfg, s.log) //nolint:contextcheck // dependencies outlive this call; Stop closes them
	// Only the roles' own metrics: a caller may read them every few milliseconds (WorkerMetrics),
	// and the Go runtime and process collectors NewDeps adds made a read about 500 µs instead of
	// about 50 (the process collector alone reads several /proc files). Those two collectors cost
	// nothing unless read, so the worker itself runs as it would with them.
	deps.Registry = prometheus.NewRegistry()
	w := NewProcess(deps)
	if err := w.Start(ctx); err != nil {
		return err
	}
	s.workers = append(s.workers, w)
	s.workerMetrics = append(s.workerMetrics, deps.Registry)
	return nil
}

// WorkerMetrics returns the metrics registries of the workers StartWorker started so far, one per
// worker process, holding the worker role's metrics only (no go_* or process_* series). They are
// read in process rather than through the workers' /metrics, so a caller can follow them often
// and cheaply, and are not merged into one Gatherer: every worker has the same series (same names
// and labels), which a merge rejects as duplicates. Not safe to call during a StartWorker.
func (s *Stack) WorkerMetrics() []prometheus.Gatherer {
	gs := make([]prometheus.Gatherer, len(s.workerMetrics))
	for i, r := range s.workerMetrics {
		gs[i] = r
	}
	return gs
}

// Stop stops the StartWorker processes (newest first), then the main process and the broker, all
// within ctx, then removes the schema and the Redis keys. keep leaves them for inspection.
func (s *Stack) Stop(ctx context.Context, keep bool) error {
	var errs []error
	for i := len(s.workers) - 1; i >= 0; i-- {
		errs = append(errs, s.workers[i].Stop(ctx))
	}
	errs = append(errs, s.parts.Stop(ctx))
	if !keep {
		errs = append(errs, Cleanup(ctx, s.Config))
	}
	return errors.Join(errs...)
}

// Process is one in-process turnstile process (the roles of its deps' configuration, through
// app.Start) with the lifecycle of package lifecycle. It is one-shot: Stop closes its deps, so a
// stopped process does not start again.
type Process struct {
	deps *app.Deps

	mu      sync.Mutex
	st      *app.Stack
	stopped bool
}

// NewProcess returns a process over deps; it takes them over (Stop closes them).
func NewProcess(deps *app.Deps) *Process { return &Process{deps: deps} }

// Start runs the roles; while they run, Start does nothing, and after Stop it fails.
func (p *Process) Start(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.stopped:
		return errors.New("start process: stopped")
	case p.st != nil:
		return nil
	}
	st, err := app.Start(ctx, p.deps, roles.All)
	if err != nil {
		p.stopped = true // app.Start closed the deps
		return err
	}
	p.st = st
	return nil
}

// URL is the base URL of the process's HTTP server; empty unless it runs.
func (p *Process) URL() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.st == nil {
		return ""
	}
	return "http://" + p.st.Addr()
}

// Stop stops the roles within ctx and closes the deps. Safe twice and before Start.
func (p *Process) Stop(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return nil
	}
	p.stopped = true
	if p.st == nil {
		p.deps.Close() //nolint:contextcheck // Close bounds its own work
		return nil
	}
	return p.st.Stop(ctx)
}

// Cleanup drops the schema and deletes the key prefix of cfg.
func Cleanup(ctx context.Context, cfg config.Config) error {
	var errs []error
	if cfg.DatabaseSchema != "" && cfg.DatabaseSchema != "public" {
		conn, err := pgx.Connect(ctx, cfg.DatabaseURL)
		if err == nil {
			_, err = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{cfg.DatabaseSchema}.Sanitize()+" CASCADE")
			_ = conn.Close(ctx)
		}
		errs = append(errs, err)
	}
	rdb, err := app.NewRedis(cfg)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	defer func() { _ = rdb.Close() }()
	del := func(ctx context.Context, c *redis.Client) error {
		it := c.Scan(ctx, 0, cfg.KeyPrefix+":*", 1000).Iterator()
		for it.Next(ctx) {
			c.Unlink(ctx, it.Val())
		}
		return it.Err()
	}
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		errs = append(errs, c.ForEachMaster(ctx, del))
	case *redis.Client:
		errs = append(errs, del(ctx, c))
	}
	return errors.Join(errs...)
}
