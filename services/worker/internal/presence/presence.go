// Package presence keeps a worker's row of worker_heartbeats (migration 00271) current: who it is
// (its lease owner), which build and agents it runs, how many turns it has in flight, and whether
// it drains. The admin API lists the rows as the workers alive now, and its drain action sets the
// row's drain_requested, which the worker reads back at its next write and acts on by draining
// (Config.Drain): it stops claiming, lets its turns in flight finish within its drain grace, hands
// the rest off and leaves its consumer groups, then idles, not ready, until its process is
// restarted. A process that starts under an identity resets its row, so a restarted worker serves.
package presence

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/turnstile-run/turnstile/pkg/lifecycle"
)

// Config describes the worker.
type Config struct {
	Identity string
	Version  string
	Agents   []string
	// Interval between writes (config.WorkerPresenceIntervalDefault).
	Interval time.Duration
	// InFlight reports the worker's turns in flight.
	InFlight func() int
	// Drain drains the worker; it is called once, on its own goroutine (owned by the Presence),
	// when an operator asked for it, and returns when the drain is over.
	Drain func(ctx context.Context)
}

// rowsKept is how long a row no worker writes any more is kept (listed as not alive) before the
// next worker's write deletes it.
const rowsKept = time.Hour

// Presence is the component writing the row.
type Presence struct {
	cfg  Config
	pool *pgxpool.Pool
	log  *slog.Logger
	loop lifecycle.Loop

	mu       sync.Mutex
	draining bool
	drainWG  sync.WaitGroup
	// wrote, when set (tests), is called after each write.
	wrote func(drainRequested bool)
}

// New returns a Presence writing through pool.
func New(pool *pgxpool.Pool, cfg Config, log *slog.Logger) *Presence {
	return &Presence{cfg: cfg, pool: pool, log: log}
}

// Start resets the worker's row and begins the writes; it returns at once. Safe twice.
func (p *Presence) Start(ctx context.Context) error {
	p.loop.Start(ctx, p.run)
	return nil
}

// Stop ends the writes and waits for a drain in progress; the row's last write says the worker
// drains (it is stopping). Safe twice and before Start.
func (p *Presence) Stop(ctx context.Context) error {
	err := p.loop.Stop(ctx, "worker presence")
	p.drainWG.Wait()
	return err
}

// Draining says whether an operator's drain was started.
func (p *Presence) Draining() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.draining
}

func (p *Presence) run(ctx context.Context) {
	if p.pool == nil {
		return
	}
	p.write(ctx, true)
	lifecycle.Every(ctx, p.cfg.Interval, func(ctx context.Context) { p.write(ctx, false) })
	// Stopping: the last write says so. The process is going away, whatever an operator asked.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if _, err := p.pool.Exec(wctx, `UPDATE worker_heartbeats SET draining = true, in_flight = $2, last_seen = now()
		WHERE identity = $1`, p.cfg.Identity, p.inFlight()); err != nil {
		p.log.DebugContext(wctx, "presence: last write failed", "err", err)
	}
}

func (p *Presence) inFlight() int {
	if p.cfg.InFlight == nil {
		return 0
	}
	return p.cfg.InFlight()
}

// write upserts the row (resetting it on the first write) and starts a drain the row asks for.
func (p *Presence) write(ctx context.Context, first bool) {
	wctx, cancel := context.WithTimeout(ctx, max(p.cfg.Interval, time.Second))
	defer cancel()
	draining := p.Draining()
	var requested bool
	err := p.pool.QueryRow(wctx, `INSERT INTO worker_heartbeats AS w (identity, version, agents, in_flight, draining)
		VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (identity) DO UPDATE SET version = EXCLUDED.version, agents = EXCLUDED.agents,
			in_flight = EXCLUDED.in_flight, draining = EXCLUDED.draining, last_seen = now(),
			drain_requested = CASE WHEN $6 THEN false ELSE w.drain_requested END,
			drain_by = CASE WHEN $6 THEN NULL ELSE w.drain_by END,
			started_at = CASE WHEN $6 THEN now() ELSE w.started_at END
		RETURNING drain_requested`,
		p.cfg.Identity, p.cfg.Version, p.cfg.Agents, p.inFlight(), draining, first).Scan(&requested)
	if err != nil {
		if ctx.Err() == nil {
			p.log.WarnContext(ctx, "presence: heartbeat not written", "err", err)
		}
		return
	}
	if first {
		if _, err := p.pool.Exec(wctx, `DELETE FROM worker_heartbeats WHERE last_seen < now() - $1 * interval '1 second'`,
			rowsKept.Seconds()); err != nil && ctx.Err() == nil {
			p.log.WarnContext(ctx, "presence: old rows not deleted", "err", err)
		}
	}
	if p.wrote != nil {
		p.wrote(requested)
	}
	if !requested || draining {
		return
	}
	p.mu.Lock()
	p.draining = true
	p.mu.Unlock()
	p.log.InfoContext(ctx, "worker drains: an operator asked for it", "identity", p.cfg.Identity)
	p.drainWG.Add(1)
	go func() {
		defer p.drainWG.Done()
		if p.cfg.Drain != nil {
			p.cfg.Drain(context.WithoutCancel(ctx))
		}
		p.log.InfoContext(ctx, "worker drained: it idles until its process is restarted", "identity", p.cfg.Identity)
	}()
}
