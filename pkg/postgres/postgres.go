package postgres

import (
	"context"
	"fmt"
	"hash/fnv"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/turnstile-run/turnstile/migrations"
)

// Options tune a pool. Zero values mean defaults.
type Options struct {
	// Schema confines the pool to one schema, created if missing.
	Schema string
	// MaxConns defaults to pgx's own default (4 per CPU, at least 4).
	MaxConns int32
	// ConnectTimeout bounds each new connection. Defaults to 5s (2s for NewLazyPool).
	ConnectTimeout time.Duration
	// PushConfigsMax is the most push configs a task may have (TURNSTILE_PUSH_CONFIGS_MAX): every
	// session of the pool sets turnstile.push_configs_max to it, which the trigger on
	// task_push_configs reads (migration 00180). Defaults to none: the trigger's own 10.
	PushConfigsMax int
}

// settings sets the sessions' parameters the options name.
func (o Options) settings(cfg *pgxpool.Config) {
	if o.Schema != "" {
		cfg.ConnConfig.RuntimeParams["search_path"] = o.Schema
	}
	if o.PushConfigsMax > 0 {
		cfg.ConnConfig.RuntimeParams[PushConfigsMaxSetting] = strconv.Itoa(o.PushConfigsMax)
	}
}

// PushConfigsMaxSetting is the session setting that bounds a task's push configs.
const PushConfigsMaxSetting = "turnstile.push_configs_max"

// NewPool connects a pool and checks it answers, so a role that needs Postgres at start fails fast
// with a legible error.
func NewPool(ctx context.Context, url string, opts Options) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse TURNSTILE_DATABASE_URL: %w", err)
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	cfg.ConnConfig.ConnectTimeout = opts.ConnectTimeout
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	}
	opts.settings(cfg)
	if opts.Schema != "" {
		schema := opts.Schema
		// Create the schema on first connect so a fresh schema works before migrations run.
		cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
			_, err := c.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize())
			return err
		}
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("create postgres pool: %w", err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, cfg.ConnConfig.ConnectTimeout)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to postgres: %w", err)
	}
	return pool, nil
}

// Migrate applies every pending migration and returns how many it applied.
func Migrate(ctx context.Context, pool *pgxpool.Pool) (int, error) {
	p, db, err := provider(ctx, pool)
	if err != nil {
		return 0, err
	}
	defer func() { _ = db.Close() }()
	res, err := p.Up(ctx)
	if err != nil {
		return 0, fmt.Errorf("apply migrations: %w", err)
	}
	return len(res), nil
}

// Status lists every migration with whether it is applied.
func Status(ctx context.Context, pool *pgxpool.Pool) ([]*goose.MigrationStatus, error) {
	p, db, err := provider(ctx, pool)
	if err != nil {
		return nil, err
	}
	defer func() { _ = db.Close() }()
	return p.Status(ctx)
}

type closer interface{ Close() error }

// migrationLockID is the advisory lock key of a schema's migrations: goose's default key for the
// public schema (so an older process migrating it still excludes a newer one), a hash of the name
// for any other.
func migrationLockID(schema string) int64 {
	if schema == "public" {
		return lock.DefaultLockID
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte("turnstile migrations " + schema))
	return int64(h.Sum64() &^ (1 << 63))
}

func provider(ctx context.Context, pool *pgxpool.Pool) (*goose.Provider, closer, error) {
	// The advisory lock is the schema's, not the database's: installations (and tests) in other
	// schemas of one database migrate side by side instead of queueing behind one lock.
	var schema string
	if err := pool.QueryRow(ctx, `SELECT coalesce(current_schema(), '')`).Scan(&schema); err != nil {
		return nil, nil, fmt.Errorf("read the current schema: %w", err)
	}
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(migrationLockID(schema)))
	if err != nil {
		return nil, nil, fmt.Errorf("create migration lock: %w", err)
	}
	db := stdlib.OpenDBFromPool(pool)
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS, goose.WithSessionLocker(locker))
	if err != nil {
		_ = db.Close()
		return nil, nil, fmt.Errorf("load migrations: %w", err)
	}
	return p, db, nil
}

// NewLazyPool returns a pool that connects on first use, for roles that must start while Postgres
// is down.
func NewLazyPool(ctx context.Context, url string, opts Options) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse TURNSTILE_DATABASE_URL: %w", err)
	}
	cfg.ConnConfig.ConnectTimeout = opts.ConnectTimeout
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 2 * time.Second
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	opts.settings(cfg)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("create postgres pool: %w", err)
	}
	return pool, nil
}
