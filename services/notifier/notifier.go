package notifier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sony/gobreaker/v2"

	"github.com/turnstile-run/turnstile/pkg/app"
	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/lifecycle"
	"github.com/turnstile-run/turnstile/services/notifier/internal/deliver"
	"github.com/turnstile-run/turnstile/services/notifier/internal/outbox"
	"github.com/turnstile-run/turnstile/services/notifier/internal/safehttp"
)

// Role builds the notifier from shared deps.
var Role = app.Role{Name: "notifier", New: func(ctx context.Context, d *app.Deps) (app.Component, error) { return New(ctx, d) }}

// statsInterval is how often the outbox gauges are refreshed.
const statsInterval = 2 * time.Second

// settleTimeout bounds recording one outcome (Postgres may be down: the row's lease then lapses
// and it is delivered again, with the same webhook-id).
const settleTimeout = 5 * time.Second

// Notifier is the running notifier role.
type Notifier struct {
	cfg    config.NotifierSettings
	owner  string
	log    *slog.Logger
	store  *outbox.Store
	client *safehttp.Client
	sender *deliver.Sender
	m      metrics
	// claims runs the claim loop: Start starts it without waiting for Postgres (the loop retries
	// every poll), and it outlives Start's context but keeps its values.
	claims lifecycle.Runner
}

type metrics struct {
	deliveries *prometheus.CounterVec
	latency    prometheus.Histogram
	open       prometheus.Gauge
	oldest     prometheus.Gauge
	dead       prometheus.Gauge
	breaker    *prometheus.GaugeVec
}

// New builds the notifier; ctx bounds the connection to Postgres.
func New(ctx context.Context, d *app.Deps) (*Notifier, error) {
	pool, err := d.Postgres(ctx)
	if err != nil {
		return nil, err
	}
	return build(d.Config, pool, d.Log, d.Registry)
}

func build(cfg config.Config, pool *pgxpool.Pool, log *slog.Logger, reg prometheus.Registerer) (*Notifier, error) {
	s := cfg.Notifier
	n := &Notifier{cfg: s, owner: cfg.InstanceID, log: log.With("role", "notifier"), store: outbox.New(pool)}
	n.claims = lifecycle.Runner{Name: "notifier", Run: n.run}
	n.m = metrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "turnstile_notifier_deliveries_total", Help: "Notifications handled, by outcome (delivered, retried, deferred, dead, fenced).",
		}, []string{"outcome"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "turnstile_notifier_delivery_seconds", Help: "Duration of one webhook POST, answer included.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
		open:    prometheus.NewGauge(prometheus.GaugeOpts{Name: "turnstile_notifier_outbox_open", Help: "Notifications neither delivered nor dead-lettered."}),
		oldest:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "turnstile_notifier_outbox_age_seconds", Help: "Age of the oldest open notification."}),
		dead:    prometheus.NewGauge(prometheus.GaugeOpts{Name: "turnstile_notifier_dead_letters", Help: "Notifications given up, kept with their last error until retention."}),
		breaker: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "turnstile_notifier_breaker_state", Help: "Circuit state per destination: 0 closed, 1 half-open, 2 open."}, []string{"destination"}),
	}
	// Every outcome has a series from the start, so a rate over it is 0 rather than absent.
	for _, o := range []string{string(deliver.Delivered), string(deliver.Retried), string(deliver.Deferred), string(deliver.Dead), "fenced", "unrecorded"} {
		n.m.deliveries.WithLabelValues(o)
	}
	for _, c := range []prometheus.Collector{n.m.deliveries, n.m.latency, n.m.open, n.m.oldest, n.m.dead, n.m.breaker} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register notifier metrics: %w", err)
		}
	}
	n.client = safehttp.New(safehttp.Options{Allow: s.AllowedNetworks(), AllowHTTP: s.AllowHTTP, Timeout: s.Timeout})
	sender, err := deliver.New(deliver.Options{
		Client: n.client, Secret: s.SigningSecret, PerDestination: s.PerDestination,
		MaxAttempts: s.MaxAttempts, MaxAge: s.MaxAge, BackoffBase: s.BackoffBase, BackoffMax: s.BackoffMax,
		SlotWait: s.Timeout / 2, Region: cfg.Region.Code, BreakerFailures: config.NotifierBreakerFailures, BreakerOpen: max(s.Timeout, 5*time.Second),
		OnBreaker: func(dest string, st gobreaker.State) {
			n.log.Warn("webhook circuit changed", "destination", dest, "state", st.String())
			if st == gobreaker.StateClosed {
				n.m.breaker.DeleteLabelValues(dest) // closed is the default: keep no series per healthy receiver
				return
			}
			n.m.breaker.WithLabelValues(dest).Set(float64(st))
		},
	})
	if err != nil {
		return nil, fmt.Errorf("TURNSTILE_NOTIFIER_SIGNING_SECRET: %w", err)
	}
	n.sender = sender
	return n, nil
}

// Start starts the claim loop. It does not wait for Postgres: the loop retries every poll.
func (n *Notifier) Start(ctx context.Context) error { return n.claims.Start(ctx) }

// Stop ends the claim loop and waits for the deliveries in flight, which hand their rows back.
// Safe twice and before Start; after Stop, Start runs the loop again.
func (n *Notifier) Stop(ctx context.Context) error {
	err := n.claims.Stop(ctx)
	n.client.CloseIdle()
	return err
}

// run claims due rows while there are free slots, and delivers each in a goroutine of its own,
// owned by run (it waits for them all before it returns).
func (n *Notifier) run(ctx context.Context) {
	var inflight sync.WaitGroup
	defer inflight.Wait()
	slots := make(chan struct{}, n.cfg.Batch)
	freed := make(chan struct{}, 1)
	stats := time.NewTicker(statsInterval)
	defer stats.Stop()
	poll := time.NewTimer(0)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-stats.C:
			n.refreshStats(ctx)
			continue
		case <-freed:
		case <-poll.C:
		}
		free := cap(slots) - len(slots)
		claimed := 0
		if free > 0 {
			rows, err := n.store.Claim(ctx, n.owner, n.cfg.Lease, free)
			if err != nil && ctx.Err() == nil {
				n.log.Warn("claim notifications failed", "err", err)
			}
			claimed = len(rows)
			for _, row := range rows {
				slots <- struct{}{}
				inflight.Go(func() {
					defer func() {
						<-slots
						select {
						case freed <- struct{}{}:
						default:
						}
					}()
					n.deliver(ctx, row)
				})
			}
		}
		next := n.cfg.Poll
		if claimed == free && free > 0 {
			next = 0 // a full batch: more may be due now
		}
		poll.Reset(next)
	}
}

// deliver sends one row and records its outcome with the claim's token.
func (n *Notifier) deliver(ctx context.Context, row outbox.Notification) {
	start := time.Now()
	res := n.sender.Deliver(ctx, row)
	if res.Attempted {
		n.m.latency.Observe(time.Since(start).Seconds())
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	var err error
	switch res.Outcome {
	case deliver.Delivered:
		err = n.store.Delivered(sctx, row)
	case deliver.Retried:
		err = n.store.Retry(sctx, row, res.Wait, res.Err)
	case deliver.Deferred:
		err = n.store.Defer(sctx, row, res.Wait)
	case deliver.Dead:
		err = n.store.Dead(sctx, row, res.Err)
		n.log.Warn("notification dead-lettered", "turn_id", row.TurnID, "tenant", row.Tenant, "status", row.Status,
			"webhook_id", row.WebhookID(), "attempts", row.Attempts+1, "err", res.Err)
	}
	outcome := string(res.Outcome)
	switch {
	case errors.Is(err, outbox.ErrFenced):
		outcome = "fenced"
	case err != nil:
		// The lease lapses and the row is delivered again, with the same webhook-id.
		n.log.Warn("record notification outcome failed", "turn_id", row.TurnID, "webhook_id", row.WebhookID(), "outcome", res.Outcome, "err", err)
		outcome = "unrecorded"
	}
	n.m.deliveries.WithLabelValues(outcome).Inc()
	if res.Outcome == deliver.Retried {
		n.log.Info("notification retry scheduled", "turn_id", row.TurnID, "webhook_id", row.WebhookID(), "wait", res.Wait, "err", res.Err)
	}
}

func (n *Notifier) refreshStats(ctx context.Context) {
	sctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	st, err := n.store.Stats(sctx)
	if err != nil {
		return
	}
	n.m.open.Set(float64(st.Open))
	n.m.oldest.Set(st.OldestAge.Seconds())
	n.m.dead.Set(float64(st.Dead))
}
