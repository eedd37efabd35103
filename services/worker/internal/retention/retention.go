package retention

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/lifecycle"
	"github.com/turnstile-run/turnstile/pkg/turnstore"
)

// StatementTimeout bounds one delete statement, so a stuck statement ends the round rather than
// the cleaner.
const StatementTimeout = 30 * time.Second

// Config tunes a Cleaner. Zero values mean defaults. Interval and Batch are operator settings, so
// their defaults are pkg/config's (see pkg/config's package doc).
type Config struct {
	// Retention is how long a finished turn row is kept. Required.
	Retention time.Duration
	// Interval is the pause between rounds (TURNSTILE_RETENTION_INTERVAL). Defaults to
	// config.RetentionIntervalDefault (1m).
	Interval time.Duration
	// Batch is the most rows one statement deletes (TURNSTILE_RETENTION_BATCH). Defaults to
	// config.RetentionBatchDefault (1000).
	Batch int
	// OnBatch, if set, is called after every delete statement with the rows it removed (metrics,
	// tests). It must be fast.
	OnBatch func(deleted int, err error)
	// OnSessions, if set, is called after every round with the session rows it removed (metrics,
	// tests). It must be fast.
	OnSessions func(deleted int, err error)
	// ThreadTTL is how long a LangGraph thread may stay idle before it is deleted
	// (TURNSTILE_LANGGRAPH_THREAD_TTL). Defaults to config.LangGraphThreadTTLDefault (7 days).
	ThreadTTL time.Duration
	// OnThreads, if set, is called after every round with the LangGraph threads it removed
	// (metrics, tests). It must be fast.
	OnThreads func(deleted int, err error)
}

// Cleaner deletes old finished turn rows in the background, then the session rows left without
// turns, then the LangGraph threads idle past their TTL.
type Cleaner struct {
	cfg Config
	db  *turnstore.Store
	log *slog.Logger

	loop lifecycle.Loop
}

// New returns a cleaner over pool.
func New(pool *pgxpool.Pool, cfg Config, log *slog.Logger) *Cleaner {
	if cfg.Interval <= 0 {
		cfg.Interval = config.RetentionIntervalDefault
	}
	if cfg.Batch <= 0 {
		cfg.Batch = config.RetentionBatchDefault
	}
	if cfg.ThreadTTL <= 0 {
		cfg.ThreadTTL = config.LangGraphThreadTTLDefault
	}
	return &Cleaner{cfg: cfg, db: turnstore.New(pool), log: log}
}

// Start begins cleaning at once and then every Interval. It returns at once.
func (c *Cleaner) Start(ctx context.Context) error {
	c.loop.Start(ctx, c.run)
	return nil
}

// Stop ends cleaning and waits for the running statement. Safe twice or before Start.
func (c *Cleaner) Stop(ctx context.Context) error { return c.loop.Stop(ctx, "retention cleaner") }

func (c *Cleaner) run(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c.RunOnce(ctx)
		t.Reset(c.cfg.Interval)
	}
}

// RunOnce deletes batches until one comes back short, then the sessions left without turns and
// the idle threads, and returns the turn rows deleted.
func (c *Cleaner) RunOnce(ctx context.Context) int {
	defer c.deleteThreads(ctx)
	defer c.deleteSessions(ctx)
	total := 0
	for ctx.Err() == nil {
		sctx, cancel := context.WithTimeout(ctx, StatementTimeout)
		n, err := c.db.DeleteFinished(sctx, c.cfg.Retention, c.cfg.Batch)
		cancel()
		if c.cfg.OnBatch != nil {
			c.cfg.OnBatch(n, err)
		}
		if err != nil {
			if ctx.Err() == nil {
				c.log.Warn("deleting expired turn rows failed; retrying next round", "err", err)
			}
			return total
		}
		total += n
		if n < c.cfg.Batch {
			break
		}
	}
	if total > 0 {
		c.log.Info("deleted expired turn rows", "rows", total, "retention", c.cfg.Retention)
	}
	return total
}

// deleteSessions deletes, in batches, the session rows no turn refers to any more and that are
// older than the retention: without it every session ever used kept its row.
func (c *Cleaner) deleteSessions(ctx context.Context) {
	total := 0
	var err error
	for ctx.Err() == nil {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		var n int
		n, err = c.db.DeleteIdleSessions(sctx, c.cfg.Retention, c.cfg.Batch)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				c.log.Warn("deleting idle session rows failed; retrying next round", "err", err)
			}
			break
		}
		total += n
		if n < c.cfg.Batch {
			break
		}
	}
	if c.cfg.OnSessions != nil {
		c.cfg.OnSessions(total, err)
	}
	if total > 0 {
		c.log.Info("deleted idle session rows", "rows", total, "retention", c.cfg.Retention)
	}
}

// deleteThreads deletes, in batches, the LangGraph threads idle longer than ThreadTTL that have no
// run queued or running: without it every thread ever created kept its row.
func (c *Cleaner) deleteThreads(ctx context.Context) {
	total := 0
	var err error
	for ctx.Err() == nil {
		sctx, cancel := context.WithTimeout(ctx, StatementTimeout)
		var n int
		n, err = c.db.DeleteIdleThreads(sctx, c.cfg.ThreadTTL, c.cfg.Batch)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				c.log.Warn("deleting idle threads failed; retrying next round", "err", err)
			}
			break
		}
		total += n
		if n < c.cfg.Batch {
			break
		}
	}
	if c.cfg.OnThreads != nil {
		c.cfg.OnThreads(total, err)
	}
	if total > 0 {
		c.log.Info("deleted idle threads", "threads", total, "ttl", c.cfg.ThreadTTL)
	}
}
