package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnstile-run/turnstile/pkg/lifecycle"
	"github.com/turnstile-run/turnstile/pkg/turnstore"
)

// Limits of a Runner: the items one batch takes (the lease is renewed between batches) and how
// many of a batch's items are acted on at once.
const (
	BatchSize   = 50
	Concurrency = 16
)

// RunnerConfig tunes a Runner.
type RunnerConfig struct {
	// Owner names this runner in the jobs' leases (the process's instance).
	Owner string
	// Lease is how long a job is held without renewal (config.AdminJobLeaseDefault).
	Lease time.Duration
	// Registry registers the runner's metrics (turnstile_admin_jobs_*); nil registers none.
	Registry prometheus.Registerer
}

// Runner runs bulk jobs: it takes a job no live runner holds, acts on its pending items batch by
// batch under the job's lease, and records each outcome fenced by that lease. Any number of intakes
// run one; a job whose runner died is taken by another once its lease expires.
type Runner struct {
	lifecycle.Runner
	cfg  RunnerConfig
	pool *pgxpool.Pool
	act  *actor
	log  *slog.Logger
	kick chan struct{}
	m    *jobMetrics
	// batchDone, when set (tests), is called after each batch is recorded.
	batchDone func(job uuid.UUID, n int)
}

// NewRunner returns a runner acting through h's collaborators.
func NewRunner(cfg RunnerConfig, h *Handler) *Runner {
	r := &Runner{cfg: cfg, pool: h.d.Pool, act: h.actor(), log: h.d.Log, kick: make(chan struct{}, 1), m: newJobMetrics(cfg.Registry)}
	r.Runner = lifecycle.Runner{Name: "admin job runner", Run: r.run}
	return r
}

// Kick tells the runner a job was created, so it looks now rather than at its next tick.
func (r *Runner) Kick() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

func (r *Runner) run(ctx context.Context) {
	if r.pool == nil {
		return
	}
	t := time.NewTicker(r.cfg.Lease / 3)
	defer t.Stop()
	for {
		for ctx.Err() == nil {
			j, ok, err := r.claim(ctx)
			if err != nil && ctx.Err() == nil {
				r.log.WarnContext(ctx, "admin: job claim failed", "err", err)
			}
			if !ok {
				break
			}
			r.runJob(ctx, j)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.kick:
		}
	}
}

// claimed is a job a runner holds.
type claimed struct {
	id           uuid.UUID
	action       string
	options      ReplayOptions
	filter       json.RawMessage
	scope        string
	by, byTenant string
}

func (r *Runner) claim(ctx context.Context) (claimed, bool, error) {
	var j claimed
	var opts []byte
	err := r.pool.QueryRow(ctx, `UPDATE admin_jobs SET lease_owner = $1, lease_expires_at = now() + $2 * interval '1 millisecond',
			runs = runs + 1, updated_at = now()
		WHERE job_id = (SELECT job_id FROM admin_jobs WHERE state IN ('running', 'cancelling')
			AND (lease_expires_at IS NULL OR lease_expires_at < now()) ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED)
		RETURNING job_id, action, options, filter, coalesce(scope, ''), created_by, creator_tenant`,
		r.cfg.Owner, r.cfg.Lease.Milliseconds()).Scan(&j.id, &j.action, &opts, &j.filter, &j.scope, &j.by, &j.byTenant)
	if errors.Is(err, pgx.ErrNoRows) {
		return j, false, nil
	}
	if err != nil {
		return j, false, fmt.Errorf("claim job: %w", err)
	}
	if err := json.Unmarshal(opts, &j.options); err != nil {
		return j, false, fmt.Errorf("job %s options: %w", j.id, err)
	}
	return j, true, nil
}

// runJob acts on the job's pending items until none is left, the job is cancelled, the lease is
// lost or ctx ends.
func (r *Runner) runJob(ctx context.Context, j claimed) {
	r.m.running.Inc()
	defer r.m.running.Dec()
	for ctx.Err() == nil {
		var state string
		err := r.pool.QueryRow(ctx, `UPDATE admin_jobs SET lease_expires_at = now() + $3 * interval '1 millisecond', updated_at = now()
			WHERE job_id = $1 AND lease_owner = $2 AND state IN ('running', 'cancelling') RETURNING state`,
			j.id, r.cfg.Owner, r.cfg.Lease.Milliseconds()).Scan(&state)
		if errors.Is(err, pgx.ErrNoRows) {
			return // another runner holds it, or it ended
		}
		if err != nil {
			r.log.WarnContext(ctx, "admin: job lease renewal failed", "job_id", j.id, "err", err)
			return
		}
		if state == JobCancelling {
			r.finish(ctx, j, JobCancelled)
			return
		}
		rows, err := r.pool.Query(ctx, `SELECT turn_id FROM admin_job_items WHERE job_id = $1 AND state = 'pending'
			ORDER BY turn_id LIMIT $2`, j.id, BatchSize)
		var ids []uuid.UUID
		if err == nil {
			ids, err = pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		}
		if err != nil {
			r.log.WarnContext(ctx, "admin: job items not read", "job_id", j.id, "err", err)
			return
		}
		if len(ids) == 0 {
			r.finish(ctx, j, JobSucceeded)
			return
		}
		results := r.actOn(ctx, j, ids)
		if ctx.Err() != nil {
			return
		}
		if err := r.record(ctx, j, results); err != nil {
			r.log.WarnContext(ctx, "admin: job batch not recorded", "job_id", j.id, "err", err)
			return
		}
		if r.batchDone != nil {
			r.batchDone(j.id, len(results))
		}
	}
}

// result is what one item's action came to; a transient error leaves the item pending.
type result struct {
	id      uuid.UUID
	outcome string
	replay  *uuid.UUID
	detail  string
	retry   bool
}

func (r *Runner) actOn(ctx context.Context, j claimed, ids []uuid.UUID) []result {
	out := make([]result, len(ids))
	sem := make(chan struct{}, Concurrency)
	var wg sync.WaitGroup
	for i, id := range ids {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out[i] = r.actOne(ctx, j, id)
		}()
	}
	wg.Wait()
	if j.action == ActionReplay {
		r.act.submit.FlushQueued(ctx)
	}
	return out
}

func (r *Runner) actOne(ctx context.Context, j claimed, id uuid.UUID) result {
	ctx, cancel := context.WithTimeout(ctx, TimeoutDefault)
	defer cancel()
	res := result{id: id}
	switch j.action {
	case ActionCancel:
		outcome, err := r.act.cancel(ctx, id)
		if err != nil {
			res.retry, res.detail = true, err.Error()
			return res
		}
		res.outcome = outcome
	case ActionReplay:
		nid := replayID(j.id, id)
		err := r.act.replay(ctx, id, nid, &j.id, j.by, j.options)
		switch {
		case errors.Is(err, turnstore.ErrNotFound):
			res.outcome, res.detail = outcomeSkipped, "the turn is gone"
		case errors.Is(err, errLive):
			res.outcome, res.detail = outcomeSkipped, err.Error()
		case err != nil:
			res.retry, res.detail = true, err.Error()
		default:
			res.outcome, res.replay = outcomeDone, &nid
		}
	}
	return res
}

// record writes a batch's outcomes and the job's progress in one transaction, fenced by the
// lease: a runner that lost the job records nothing.
func (r *Runner) record(ctx context.Context, j claimed, results []result) error {
	tx, err := r.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var done, failed, retries int
	var lastErr string
	b := &pgx.Batch{}
	for _, res := range results {
		if res.retry {
			retries++
			lastErr = res.detail
			continue
		}
		b.Queue(`UPDATE admin_job_items SET state = $3, result_turn_id = $4, detail = nullif($5, ''), done_at = now()
			WHERE job_id = $1 AND turn_id = $2 AND state = 'pending'`, j.id, res.id, res.outcome, res.replay, res.detail)
		if res.outcome == outcomeFailed {
			failed++
		} else {
			done++
		}
	}
	b.Queue(`UPDATE admin_jobs SET done = done + $3, failed = failed + $4, error = nullif($5, ''), updated_at = now()
		WHERE job_id = $1 AND lease_owner = $2`, j.id, r.cfg.Owner, done, failed, lastErr)
	br := tx.SendBatch(ctx, b)
	var last int64
	for range b.Len() {
		tag, err := br.Exec()
		if err != nil {
			_ = br.Close()
			return err
		}
		last = tag.RowsAffected()
	}
	if err := br.Close(); err != nil {
		return err
	}
	if last == 0 {
		return errors.New("the job's lease was lost")
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	for _, res := range results {
		if res.retry {
			r.m.items.WithLabelValues(j.action, "retried").Inc()
		} else {
			r.m.items.WithLabelValues(j.action, res.outcome).Inc()
		}
	}
	if retries > 0 { // a dependency is failing: give it a moment before the next batch
		t := time.NewTimer(r.cfg.Lease / 3)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
	return nil
}

// finish ends the job in state and audits its end.
func (r *Runner) finish(ctx context.Context, j claimed, state string) {
	var total, done, failed int
	err := r.pool.QueryRow(ctx, `UPDATE admin_jobs SET state = $3, finished_at = now(), lease_owner = NULL,
			lease_expires_at = NULL, updated_at = now()
		WHERE job_id = $1 AND lease_owner = $2 AND state IN ('running', 'cancelling') RETURNING total, done, failed`,
		j.id, r.cfg.Owner, state).Scan(&total, &done, &failed)
	if err != nil {
		if !errors.Is(err, pgx.ErrNoRows) {
			r.log.WarnContext(ctx, "admin: job end not recorded", "job_id", j.id, "err", err)
		}
		return
	}
	r.m.finished.WithLabelValues(j.action, state).Inc()
	writeAudit(ctx, r.pool, r.log, j.by, j.byTenant, "job.finish", r.act.showID(j.id), j.filter, state,
		fmt.Sprintf("%s: %d of %d items done, %d failed", j.action, done, total, failed))
}
