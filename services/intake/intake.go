package intake

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/turnstile-run/turnstile/pkg/app"
	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/pkg/kafka"
	"github.com/turnstile-run/turnstile/pkg/postgres"
	"github.com/turnstile-run/turnstile/pkg/streamtoken"
	"github.com/turnstile-run/turnstile/pkg/telemetry"
	"github.com/turnstile-run/turnstile/services/intake/internal/api"
	"github.com/turnstile-run/turnstile/services/intake/internal/backlog"
	"github.com/turnstile-run/turnstile/services/intake/internal/record"
)

// Role builds intake from shared deps.
var Role = app.Role{Name: "intake", New: func(ctx context.Context, d *app.Deps) (app.Component, error) { return New(ctx, d) }}

// Intake is the running intake role.
type Intake struct {
	deps     *app.Deps
	producer *kgo.Client
	recorder *record.Recorder
	handler  *api.Handler
	backlog  *backlog.Monitor
	ready    atomic.Bool
	stopOnce sync.Once
}

// Options tune New beyond the configuration.
type Options struct {
	// BacklogAge overrides the backlog monitor's age for admission control (tests force a backlog).
	BacklogAge func() time.Duration
}

// New builds intake. Postgres and Redis are optional at start (static stability): status reads
// answer 503 until Postgres does, quotas fail open while Redis is down, and turns keep being accepted.
func New(ctx context.Context, d *app.Deps) (*Intake, error) { return NewWithOptions(ctx, d, Options{}) }

// NewWithOptions is New with options.
func NewWithOptions(ctx context.Context, d *app.Deps, opts Options) (*Intake, error) {
	cfg := d.Config
	log := d.Log.With("role", "intake")
	keys, err := cfg.Auth.Keys()
	if err != nil {
		return nil, err
	}
	producer, err := kafka.NewClient(kafka.ProducerOpts(cfg.BrokerList())...)
	if err != nil {
		return nil, err
	}
	var pool *pgxpool.Pool
	if p, err := d.Postgres(ctx); err == nil {
		pool = p
	} else {
		log.Warn("postgres unavailable at start; status reads answer 503 and quotas fail open until it is", "err", err)
		if p, lerr := postgres.NewLazyPool(ctx, cfg.DatabaseURL, cfg.DatabaseSchema); lerr == nil {
			pool = p
		}
	}
	rdb, err := d.Redis()
	if err != nil {
		log.Warn("redis client unavailable; tenant quotas and idempotency records fail open", "err", err)
		rdb = nil
	}
	if !cfg.Auth.Enabled() {
		log.Warn("TURNSTILE_AUTH=off: API keys are NOT checked and every request acts as tenant \"" +
			api.DefaultTenant + "\"; set TURNSTILE_AUTH=on outside development")
	}
	rec := record.New(pool, cfg.Intake.QueueFlushInterval, log, d.Registry)
	// The backlog-age signal lives here because intake does not scale to zero with the workers.
	monitor := backlog.New(backlog.Config{Interval: cfg.Ops.BacklogInterval}, pool, log, d.Registry)
	backlogAge := opts.BacklogAge
	if backlogAge == nil {
		backlogAge = monitor.Age
	}
	h := api.New(api.Config{
		Topic:           cfg.Topic,
		MaxBody:         cfg.MaxBody,
		DefaultDeadline: cfg.DefaultDeadline,
		MinUsefulTime:   cfg.MinUsefulTime,
		ProduceTimeout:  cfg.ProduceTimeout,
		MaxBacklogAge:   cfg.Intake.MaxBacklogAge,
		BacklogAge:      backlogAge,
		TenantRate:      cfg.Intake.TenantRate,
		TenantBurst:     cfg.Intake.TenantBurst,
		MaxQueuedTurns:  cfg.Intake.MaxQueuedTurns,
		IdempotencyTTL:  cfg.Intake.IdempotencyTTL,
		RetryAfter:      cfg.Intake.RetryAfter,
		AuthEnabled:     cfg.Auth.Enabled(),
		KeyPrefix:       cfg.KeyPrefix,
	}, api.Deps{
		Producer: producer,
		Pool:     pool,
		Redis:    rdb,
		Signer:   streamtoken.New(streamtoken.Options{Keys: keys, TTL: cfg.Auth.StreamTokenTTL}),
		Recorder: rec,
		Log:      log,
		Registry: d.Registry,
	})
	return &Intake{deps: d, producer: producer, recorder: rec, handler: h, backlog: monitor}, nil
}

// Routes mounts the intake API.
// Each request runs in a server span whose context travels with the turn.
func (i *Intake) Routes(r chi.Router) {
	i.handler.Routes(r.With(telemetry.Middleware("intake")))
	r.Get("/v1/backlog", i.serveBacklog)
}

// BacklogAge is the current backlog age (see internal/backlog).
func (i *Intake) BacklogAge() time.Duration { return i.backlog.Age() }

// serveBacklog answers KEDA's metrics-api scaler: {"backlog_age_seconds": 12.5}.
func (i *Intake) serveBacklog(w http.ResponseWriter, _ *http.Request) {
	httpx.WriteJSON(w, http.StatusOK, map[string]float64{"backlog_age_seconds": i.backlog.Age().Seconds()})
}

// Start starts the queued-row recorder and the backlog monitor and marks intake ready. The producer
// connects on first use.
func (i *Intake) Start(ctx context.Context) error {
	if err := i.recorder.Start(ctx); err != nil {
		return err
	}
	if err := i.backlog.Start(ctx); err != nil {
		return err
	}
	i.ready.Store(true)
	return nil
}

// Ready reports whether intake accepts turns.
func (i *Intake) Ready() bool { return i.ready.Load() }

// Stop flushes buffered records and queued rows and closes the producer. Safe twice.
func (i *Intake) Stop(ctx context.Context) error {
	var err error
	i.stopOnce.Do(func() {
		i.ready.Store(false)
		err = errors.Join(i.producer.Flush(ctx), i.recorder.Stop(ctx), i.backlog.Stop(ctx), i.handler.Close())
		i.producer.Close()
	})
	return err
}
