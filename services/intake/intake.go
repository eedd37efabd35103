package intake

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/turnstile-run/turnstile/pkg/app"
	"github.com/turnstile-run/turnstile/pkg/backlog"
	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/pkg/kafka"
	"github.com/turnstile-run/turnstile/pkg/postgres"
	"github.com/turnstile-run/turnstile/pkg/telemetry"
	"github.com/turnstile-run/turnstile/pkg/turnstore"
	"github.com/turnstile-run/turnstile/services/intake/internal/api"
)

// Role builds intake from shared deps.
var Role = app.Role{Name: "intake", New: func(ctx context.Context, d *app.Deps) (app.Component, error) { return New(ctx, d) }}

// Intake is the running intake role.
type Intake struct {
	deps     *app.Deps
	producer *kgo.Client
	handler  *api.Handler
	backlog  *backlog.Monitor
	ready    atomic.Bool
	stopOnce sync.Once
}

// New builds intake. Postgres is optional at start (static stability): status reads fail with 503
// until it answers, while turns keep being accepted.
func New(ctx context.Context, d *app.Deps) (*Intake, error) {
	cfg := d.Config
	log := d.Log.With("role", "intake")
	producer, err := kafka.NewClient(kafka.ProducerOpts(cfg.BrokerList())...)
	if err != nil {
		return nil, err
	}
	var store *turnstore.Store
	pool, err := d.Postgres(ctx)
	if err != nil {
		log.Warn("postgres unavailable at start; turn status reads will answer 503 until it is", "err", err)
		pool, _ = postgres.NewLazyPool(cfg.DatabaseURL, cfg.DatabaseSchema)
	}
	if pool != nil {
		store = turnstore.New(pool)
	}
	// The backlog-age signal lives here because intake does not scale to zero with the workers.
	monitor := backlog.New(backlog.Config{Interval: cfg.Ops.BacklogInterval}, pool, log, d.Registry)
	h := api.New(api.Config{
		Topic:           cfg.Topic,
		MaxBody:         cfg.MaxBody,
		DefaultDeadline: cfg.DefaultDeadline,
		MinUsefulTime:   cfg.MinUsefulTime,
		ProduceTimeout:  cfg.ProduceTimeout,
		BacklogAge:      monitor.Age,
	}, producer, store, log, d.Registry)
	return &Intake{deps: d, producer: producer, handler: h, backlog: monitor}, nil
}

// Routes mounts the intake API, each request in a server span whose context travels with the turn.
func (i *Intake) Routes(r chi.Router) {
	i.handler.Routes(r.With(telemetry.Middleware("intake")))
	r.Get("/v1/backlog", i.serveBacklog)
}

// BacklogAge is the current backlog age (see pkg/backlog).
func (i *Intake) BacklogAge() time.Duration { return i.backlog.Age() }

// serveBacklog answers KEDA's metrics-api scaler: {"backlog_age_seconds": 12.5}.
func (i *Intake) serveBacklog(w http.ResponseWriter, _ *http.Request) {
	httpx.WriteJSON(w, http.StatusOK, map[string]float64{"backlog_age_seconds": i.backlog.Age().Seconds()})
}

// Start starts the backlog monitor and marks intake ready. The producer connects on first use.
func (i *Intake) Start(ctx context.Context) error {
	if err := i.backlog.Start(ctx); err != nil {
		return err
	}
	i.ready.Store(true)
	return nil
}

// Ready reports whether intake accepts turns.
func (i *Intake) Ready() bool { return i.ready.Load() }

// Stop flushes buffered records and closes the producer. Safe twice.
func (i *Intake) Stop(ctx context.Context) error {
	var err error
	i.stopOnce.Do(func() {
		i.ready.Store(false)
		err = errors.Join(i.producer.Flush(ctx), i.backlog.Stop(ctx))
		i.producer.Close()
	})
	return err
}
