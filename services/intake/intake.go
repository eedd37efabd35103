package intake

import (
	"context"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/turnstile-run/turnstile/pkg/apikey"
	"github.com/turnstile-run/turnstile/pkg/app"
	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/pkg/kafka"
	"github.com/turnstile-run/turnstile/pkg/lifecycle"
	"github.com/turnstile-run/turnstile/pkg/quota"
	"github.com/turnstile-run/turnstile/pkg/streams"
	"github.com/turnstile-run/turnstile/pkg/streamtoken"
	"github.com/turnstile-run/turnstile/pkg/telemetry"
	"github.com/turnstile-run/turnstile/pkg/turnstore"
	"github.com/turnstile-run/turnstile/pkg/wire"
	"github.com/turnstile-run/turnstile/services/intake/internal/admin"
	"github.com/turnstile-run/turnstile/services/intake/internal/admincli"
	"github.com/turnstile-run/turnstile/services/intake/internal/api"
	"github.com/turnstile-run/turnstile/services/intake/internal/backlog"
	"github.com/turnstile-run/turnstile/services/intake/internal/console"
	"github.com/turnstile-run/turnstile/services/intake/internal/record"
	"github.com/turnstile-run/turnstile/services/intake/internal/redrive"
	"github.com/turnstile-run/turnstile/services/intake/internal/registry"
	"github.com/turnstile-run/turnstile/services/intake/internal/schedule"
)

// Role builds intake from shared deps. It brings the `apikey` command, which manages the API keys
// intake checks, and the admin API's CLI (`turns`, `jobs`, `workers`, `dlq`, `audit`; package
// admincli).
var Role = app.Role{
	Name:     "intake",
	New:      func(ctx context.Context, d *app.Deps) (app.Component, error) { return New(ctx, d) },
	Commands: append([]app.Command{APIKeyCommand}, admincli.Commands...),
}

// APIKeyCommand is `apikey create --tenant NAME | import --tenant NAME --key KEY |
// list [--tenant NAME] | revoke KEY_ID` (see pkg/apikey); created key IDs carry the region's
// prefix when TURNSTILE_REGION is set.
var APIKeyCommand = app.Command{
	Name:  "apikey",
	Usage: "apikey create|import|list|revoke",
	Run: func(ctx context.Context, env app.CommandEnv, args []string) error {
		pool, err := env.Postgres(ctx)
		if err != nil {
			return err
		}
		defer pool.Close()
		return apikey.Command(ctx, pool, env.Config.Region.Code, args, env.Stdout)
	},
}

// Intake is the running intake role: its shell (app.Shell) starts the queued-row recorder, the
// backlog monitor, the re-driver and the scheduler of scheduled turns (package schedule), and its Stop also flushes and closes the producer, so a
// stopped intake does not start again.
type Intake struct {
	*app.Shell
	deps     *app.Deps
	handler  *api.Handler
	admin    *admin.Handler
	backlog  *backlog.Monitor
	redriver *redrive.Redriver
	// scheduler is nil without a Postgres pool.
	scheduler *schedule.Scheduler
	registry  *registry.Handler
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
	signer := streamtoken.New(streamtoken.Options{Keys: keys, TTL: cfg.Auth.StreamTokenTTL})
	place, err := cfg.Region.Local()
	if err != nil {
		return nil, err
	}
	producer, err := kafka.NewClient(kafka.ProducerOpts(cfg.BrokerList())...)
	if err != nil {
		return nil, err
	}
	// Without any pool (an unparsable database URL) status reads answer 503 as well.
	pool, _ := d.PostgresOrLazy(ctx, log, "status reads answer 503 and quotas fail open until it is")
	rdb, err := d.Redis()
	if err != nil {
		log.Warn("redis client unavailable; tenant quotas and idempotency records fail open", "err", err)
		rdb = nil
	}
	if !cfg.Auth.Enabled() {
		log.Warn("TURNSTILE_AUTH=off: API keys are NOT checked and every request acts as tenant \"" +
			wire.DefaultTenant + "\"; set TURNSTILE_AUTH=on outside development")
	}
	catalog, err := d.Agents()
	if err != nil {
		return nil, err
	}
	rec := record.New(pool, cfg.Intake.QueueFlushInterval, log, d.Registry)
	var events *streams.Publisher
	if rdb != nil {
		events = streams.NewPublisher(rdb, cfg.KeyPrefix, cfg.StreamMaxLen, cfg.StreamRetention)
		if pool != nil {
			// Its terminal events are fenced against the workers' with Postgres's tokens.
			events.WithFencer(turnstore.New(pool))
		}
	}
	// The re-driver lives here for the reason the backlog monitor does, and because it produces
	// through intake's producer (package redrive).
	redriver := redrive.New(redrive.Config{
		Topic: cfg.Topic, Agents: catalog.Catalog, Partitions: cfg.Partitions, Region: cfg.Region.Code, Interval: cfg.Intake.RedriveInterval, ProduceTimeout: cfg.ProduceTimeout,
	}, pool, producer, events, log, d.Registry)
	// The backlog-age signal lives here because intake does not scale to zero with the workers.
	monitor := backlog.New(backlog.Config{Interval: cfg.Ops.BacklogInterval, Agents: catalog.Catalog}, pool, log, d.Registry)
	backlogAge, backlogAgeOf := opts.BacklogAge, monitor.AgeOf
	if backlogAge != nil {
		backlogAgeOf = nil
	} else {
		backlogAge = monitor.Age
	}
	proxies, err := cfg.TrustedProxyList()
	if err != nil {
		return nil, err
	}
	// The quotas set through /v1/admin/quotas (rates and token budgets are applied here; running
	// caps by the workers), re-read every TURNSTILE_QUOTA_REFRESH.
	var quotas *quota.Watcher
	quotaSnapshot := func() *quota.Snapshot { return nil }
	if pool != nil {
		quotas = quota.NewWatcher(quota.NewStore(pool), cfg.Worker.QuotaRefresh, catalog.Catalog().Default, log)
		quotaSnapshot = quotas.Snapshot
		if d.Registry != nil {
			quotas.Register(d.Registry, "intake")
		}
	}
	h := api.New(api.Config{
		Quotas:           quotaSnapshot,
		Topic:            cfg.Topic,
		Agents:           catalog.Catalog,
		BacklogAgeOf:     backlogAgeOf,
		MaxBody:          cfg.MaxBody,
		DefaultDeadline:  cfg.DefaultDeadline,
		MinUsefulTime:    cfg.MinUsefulTime,
		ProduceTimeout:   cfg.ProduceTimeout,
		MaxBacklogAge:    cfg.Intake.MaxBacklogAge,
		BacklogAge:       backlogAge,
		TenantRate:       cfg.Intake.TenantRate,
		TenantBurst:      cfg.Intake.TenantBurst,
		MaxQueuedTurns:   cfg.Intake.MaxQueuedTurns,
		IdempotencyTTL:   cfg.Intake.IdempotencyTTL,
		RetryAfter:       cfg.Intake.RetryAfter,
		AuthEnabled:      cfg.Auth.Enabled(),
		TrustedProxies:   proxies,
		KeyPrefix:        cfg.KeyPrefix,
		WebhookAllowHTTP: cfg.Notifier.AllowHTTP,
		Region:           place,
		SchedulesMax:     cfg.Schedules.Max,
	}, api.Deps{
		Producer: producer,
		Pool:     pool,
		Redis:    rdb,
		Signer:   signer,
		Recorder: rec,
		TopicID:  redriver.TopicID,
		EnsureTopic: func(ctx context.Context, topic string) error {
			return kafka.EnsureTopics(ctx, cfg.BrokerList(), int32(cfg.Partitions), topic)
		},
		Events:   events,
		Log:      log,
		Registry: d.Registry,
	})
	// The admin API and its bulk jobs live here: replays are produced through intake's path.
	var jobs *admin.Runner
	prices, err := cfg.Intake.Prices()
	if err != nil {
		return nil, err
	}
	adm := admin.New(admin.Config{
		Region: cfg.Region.Code, KeyPrefix: cfg.KeyPrefix, DefaultDeadline: cfg.DefaultDeadline,
		PresenceInterval: cfg.Worker.PresenceInterval, Prices: prices,
	}, admin.Deps{
		Pool: pool, Redis: rdb, Events: events, Submit: h, Signer: signer, Authenticate: h.Authenticate,
		Kick: func() { jobs.Kick() }, Settings: func() []config.Setting { return config.View(cfg) }, Log: log,
	})
	jobs = admin.NewRunner(admin.RunnerConfig{Owner: cfg.InstanceID, Lease: cfg.Intake.AdminJobLease, Registry: d.Registry}, adm)
	// The agent registry's write path lives here, beside the catalog it registers replicas of.
	reg := registry.New(registry.Config{
		Lease: cfg.Registry.Lease, MaxInflight: cfg.Registry.MaxInflight, Agents: catalog.Catalog,
	}, registry.Deps{Pool: pool, Authenticate: h.Authenticate, Log: log, Registry: d.Registry})
	i := &Intake{deps: d, handler: h, admin: adm, backlog: monitor, redriver: redriver, registry: reg}
	var parts lifecycle.Group
	parts.Add("agents catalog", catalog).Add("turns topic", lifecycle.StartFunc(i.readTopic)).
		Add("queued-row recorder", rec).Add("backlog monitor", monitor).Add("re-driver", redriver).
		Add("admin job runner", jobs)
	if pool != nil {
		parts.Add("quota watcher", quotas)
		// The scheduler lives here because its ticks go through this accept path, and intake
		// never scales to zero (package schedule).
		i.scheduler = schedule.New(schedule.Config{
			Owner: cfg.InstanceID, PollInterval: cfg.Schedules.PollInterval, LeaseTTL: cfg.Schedules.TickLease,
			MisfireGrace: cfg.Schedules.MisfireGrace, Region: cfg.Region.Code,
		}, schedule.NewStore(pool), h.PostScheduled, log, d.Registry)
		parts.Add("scheduler", i.scheduler)
		parts.Add("registry sweeper", registry.NewSweeper(registry.SweepConfig{
			Interval: cfg.Registry.SweepInterval, GuardShare: float64(cfg.Registry.ExpiryGuard) / 100,
			TombstoneTTL: cfg.Registry.TombstoneTTL, Window: cfg.Registry.Lease, Lease: cfg.Registry.Lease,
			// A third of a lease: longer than a heartbeat's jitter spreads a zone's expiries.
			Grace: cfg.Registry.Lease / 3,
		}, reg.Store(), log, d.Registry))
	}
	i.Shell = app.NewShell(app.ShellConfig{
		Name:  "intake",
		Parts: &parts,
		// The records in flight are acknowledged before the recorder, whose rows they settle, stops.
		Wait: producer.Flush,
		// The recorder's last rows are written before the count.
		Close: func(ctx context.Context) error {
			redriver.Report(ctx)
			err := h.Close()
			producer.Close()
			return err
		},
	})
	return i, nil
}

// Routes mounts the intake API, the admin API and the console (/console/) over it.
// Each request runs in a server span whose context travels with the turn.
func (i *Intake) Routes(r chi.Router) {
	i.handler.Routes(r.With(telemetry.Middleware("intake")))
	i.admin.Routes(r.With(telemetry.Middleware("intake")))
	i.registry.Routes(r.With(telemetry.Middleware("intake")))
	console.Routes(r)
	r.Get("/v1/backlog", i.serveBacklog)
}

// BacklogAge is the current backlog age (see internal/backlog).
func (i *Intake) BacklogAge() time.Duration { return i.backlog.Age() }

// serveBacklog answers KEDA's metrics-api scaler: {"backlog_age_seconds": 12.5, "paused_turns": 0},
// the oldest agent's age, or with ?agent=NAME that agent's (each agent's ScaledObject asks for its
// own). paused_turns are the queued turns a queue pause holds: shown apart, never in the age.
func (i *Intake) serveBacklog(w http.ResponseWriter, r *http.Request) {
	age, paused := i.backlog.Age(), i.backlog.Paused()
	if name := r.URL.Query().Get("agent"); name != "" {
		age, paused = i.backlog.AgeOf(name), i.backlog.PausedOf(name)
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]float64{"backlog_age_seconds": age.Seconds(), "paused_turns": float64(paused)})
}

// readTopic reads the turns topic's ID, which goes with every queued row (package redrive), before
// the first turn is accepted. Bounded: Kafka may be down, and intake then refuses turns anyway.
// The producer connects on first use.
func (i *Intake) readTopic(ctx context.Context) error {
	tctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := i.redriver.ReadTopic(tctx); err != nil {
		i.deps.Log.Warn("the turns topic's ID is not known yet; rows of turns accepted meanwhile are re-driven by age if their records are lost", "err", err)
	}
	return nil
}
