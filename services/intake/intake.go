package intake

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/go-chi/chi/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/turnstile-run/turnstile/pkg/app"
	"github.com/turnstile-run/turnstile/pkg/kafka"
	"github.com/turnstile-run/turnstile/pkg/postgres"
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
	if pool, err := d.Postgres(ctx); err == nil {
		store = turnstore.New(pool)
	} else {
		log.Warn("postgres unavailable at start; turn status reads will answer 503 until it is", "err", err)
		if pool, lerr := postgres.NewLazyPool(cfg.DatabaseURL, cfg.DatabaseSchema); lerr == nil {
			store = turnstore.New(pool)
		}
	}
	h := api.New(api.Config{
		Topic:           cfg.Topic,
		MaxBody:         cfg.MaxBody,
		DefaultDeadline: cfg.DefaultDeadline,
		MinUsefulTime:   cfg.MinUsefulTime,
		ProduceTimeout:  cfg.ProduceTimeout,
	}, producer, store, log, d.Registry)
	return &Intake{deps: d, producer: producer, handler: h}, nil
}

// Routes mounts the intake API.
func (i *Intake) Routes(r chi.Router) { i.handler.Routes(r) }

// Start marks intake ready. The producer connects on first use.
func (i *Intake) Start(context.Context) error {
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
		err = i.producer.Flush(ctx)
		i.producer.Close()
	})
	return err
}
