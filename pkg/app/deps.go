package app

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/postgres"
)

// Deps are the shared collaborators of a process's roles.
type Deps struct {
	Config   config.Config
	Log      *slog.Logger
	Registry *prometheus.Registry

	pgOnce sync.Once
	pg     *pgxpool.Pool
	pgErr  error

	redisOnce sync.Once
	redis     redis.UniversalClient
}

// NewDeps returns deps with a fresh metrics registry that also carries the Go and process
// collectors.
func NewDeps(cfg config.Config, log *slog.Logger) *Deps {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	return &Deps{Config: cfg, Log: log, Registry: reg}
}

// Postgres returns the process's pool, connecting (and migrating, when TURNSTILE_MIGRATE=auto) on
// first use.
func (d *Deps) Postgres(ctx context.Context) (*pgxpool.Pool, error) {
	d.pgOnce.Do(func() {
		pool, err := postgres.NewPool(ctx, d.Config.DatabaseURL, postgres.Options{Schema: d.Config.DatabaseSchema})
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

// Close releases the shared clients.
func (d *Deps) Close() {
	if d.pg != nil {
		d.pg.Close()
	}
	if d.redis != nil {
		_ = d.redis.Close()
	}
}
