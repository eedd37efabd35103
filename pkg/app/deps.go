package app

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/turnstile-run/turnstile/pkg/admission"
	"github.com/turnstile-run/turnstile/pkg/agents"
	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/postgres"
	"github.com/turnstile-run/turnstile/pkg/telemetry"
)

// Deps are the shared collaborators of a process's roles.
type Deps struct {
	Config   config.Config
	Log      *slog.Logger
	Registry *prometheus.Registry
	// Tracing makes the process's spans (pkg/telemetry); tests may replace it before Start.
	Tracing trace.TracerProvider

	pgOnce sync.Once
	pg     *pgxpool.Pool
	pgErr  error

	// lazyOnce makes lazyPG, the pool of the roles that start while Postgres is down.
	lazyOnce sync.Once
	lazyPG   *pgxpool.Pool
	lazyErr  error

	redisOnce sync.Once
	redis     redis.UniversalClient

	admissionOnce sync.Once
	admission     *admission.Budget

	agentsOnce sync.Once
	agents     *agents.Watcher
	agentsErr  error

	// localURL is the process's own HTTP listener, set by Start before any role is built.
	localURL string
}

// LocalURL is the base URL of the process's own HTTP listener ("http://127.0.0.1:8080"); Start
// sets it before it builds the roles.
func (d *Deps) LocalURL() string { return d.localURL }

// Agents returns the process's agents catalog watcher (pkg/agents), loaded on first use from
// TURNSTILE_AGENTS_FILE (or the TURNSTILE_AGENT settings without one): every role of the process
// reads one catalog. A bad file is an error naming every problem. The roles that read it add it to
// their parts, so it reloads while any of them runs (its Start and Stop are safe twice).
func (d *Deps) Agents() (*agents.Watcher, error) {
	d.agentsOnce.Do(func() {
		var reg prometheus.Registerer
		if d.Registry != nil {
			reg = d.Registry
		}
		d.agents, d.agentsErr = agents.NewWatcher(d.Config, d.Log.With("component", "agents"), reg)
	})
	return d.agents, d.agentsErr
}

// Admission returns the process's stream budget (pkg/admission), made on first use from the
// TURNSTILE_GATEWAY_MAX_* caps with its metrics on Registry: every role's long-lived streams —
// the gateway's, A2A's, the AI SDK's, LangGraph's — count against it together, so roles composed
// in one process share one cap and one tenant share.
func (d *Deps) Admission() *admission.Budget {
	d.admissionOnce.Do(func() {
		gs := d.Config.Gateway
		or := func(v, def int) int {
			if v == 0 {
				return def
			}
			return v
		}
		d.admission = admission.New(admission.Config{
			MaxStreams:    or(gs.MaxConnections, config.GatewayMaxConnectionsDefault),
			MaxPerSession: or(gs.MaxPerSession, config.GatewayMaxPerSessionDefault),
			TenantShare:   or(gs.MaxTenantShare, config.GatewayMaxTenantShareDefault),
			Retry:         gs.OverloadRetry,
		})
		d.admission.Register(d.Registry)
	})
	return d.admission
}

// NewDeps returns deps with a fresh metrics registry that also carries the Go and process
// collectors and turnstile_build_info.
func NewDeps(cfg config.Config, log *slog.Logger) *Deps {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	registerBuildInfo(reg, BuildInfo())
	tp, err := telemetry.NewProvider(telemetry.Options{
		Service:      telemetry.ServiceName(cfg.RoleList()),
		Instance:     cfg.InstanceID,
		OTLPEndpoint: cfg.Ops.OTLPEndpoint,
		SampleRatio:  cfg.Ops.TraceSampleRatio,
	})
	if err != nil {
		log.Error("tracing disabled", "err", err)
	}
	d := &Deps{Config: cfg, Log: log, Registry: reg}
	if tp != nil {
		d.Tracing = tp
	}
	return d
}

// Postgres returns the process's pool, connecting (and migrating, when TURNSTILE_MIGRATE=auto) on
// first use.
func (d *Deps) Postgres(ctx context.Context) (*pgxpool.Pool, error) {
	d.pgOnce.Do(func() {
		pool, err := postgres.NewPool(ctx, d.Config.DatabaseURL, d.postgresOptions())
		if err != nil {
			d.pgErr = err
			return
		}
		if d.Config.Migrate == "auto" {
			n, err := postgres.Migrate(ctx, pool)
			if err != nil {
				pool.Close()
				d.pgErr = err
				return
			}
			if n > 0 {
				d.Log.Info("applied migrations", "count", n)
			}
		}
		d.pg = pool
	})
	return d.pg, d.pgErr
}

// postgresOptions are the process's pool settings: its schema and the session settings triggers
// read.
func (d *Deps) postgresOptions() postgres.Options {
	return postgres.Options{Schema: d.Config.DatabaseSchema, PushConfigsMax: d.Config.Intake.PushConfigsMax}
}

// PostgresOrLazy is Postgres for a role that must start while Postgres is down (static
// stability). When Postgres does not answer, it logs that, with what the role does meanwhile, and
// returns a pool that connects once Postgres answers (postgres.NewLazyPool, without migrating):
// one for the process, closed by Close. The error says only that no pool could be made at all
// (an unparsable TURNSTILE_DATABASE_URL); the pool is then nil.
func (d *Deps) PostgresOrLazy(ctx context.Context, log *slog.Logger, meanwhile string) (*pgxpool.Pool, error) {
	pool, err := d.Postgres(ctx)
	if err == nil {
		return pool, nil
	}
	log.Warn("postgres unavailable at start; "+meanwhile, "err", err)
	d.lazyOnce.Do(func() {
		d.lazyPG, d.lazyErr = postgres.NewLazyPool(ctx, d.Config.DatabaseURL, d.postgresOptions())
	})
	return d.lazyPG, d.lazyErr
}

// Redis returns the process's Redis client: a cluster client when TURNSTILE_REDIS_CLUSTER_ADDRS is
// set, otherwise one built from TURNSTILE_REDIS_URL. Creating it does not connect.
func (d *Deps) Redis() (redis.UniversalClient, error) {
	var err error
	d.redisOnce.Do(func() {
		d.redis, err = NewRedis(d.Config)
	})
	if err != nil {
		return nil, err
	}
	if d.redis == nil {
		return nil, fmt.Errorf("redis client unavailable")
	}
	return d.redis, nil
}

// NewRedis builds a go-redis UniversalClient from the configuration.
func NewRedis(cfg config.Config) (redis.UniversalClient, error) {
	if addrs := cfg.RedisClusterList(); len(addrs) > 0 {
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs}), nil
	}
	opts, err := redis.ParseURL(cfg.RedisURL)
	if err != nil {
		return nil, fmt.Errorf("parse TURNSTILE_REDIS_URL: %w", err)
	}
	return redis.NewClient(opts), nil
}

// Close releases the shared clients and flushes buffered spans.
func (d *Deps) Close() {
	if sd, ok := d.Tracing.(interface{ Shutdown(context.Context) error }); ok {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = sd.Shutdown(ctx)
		cancel()
	}
	if d.pg != nil {
		d.pg.Close()
	}
	if d.lazyPG != nil {
		d.lazyPG.Close()
	}
	if d.redis != nil {
		_ = d.redis.Close()
	}
}
