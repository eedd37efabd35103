package api

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-redis/redis_rate/v10"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/turnstile-run/turnstile/pkg/agents"
	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/openapi"
	"github.com/turnstile-run/turnstile/pkg/quota"
	"github.com/turnstile-run/turnstile/pkg/region"
	"github.com/turnstile-run/turnstile/pkg/streams"
	"github.com/turnstile-run/turnstile/pkg/streamtoken"
	"github.com/turnstile-run/turnstile/pkg/turnstore"
	"github.com/turnstile-run/turnstile/services/intake/internal/record"
	"github.com/turnstile-run/turnstile/services/intake/internal/schedule"
)

// Defaults of the Config fields that no environment variable sets. The fields TURNSTILE_*
// variables set default to pkg/config's constants of the same name.
const (
	// RedisTimeoutDefault bounds every Redis call on the accept path, so a hung Redis costs a
	// request at most this much before intake fails open.
	RedisTimeoutDefault = 250 * time.Millisecond
	// CheckTimeoutDefault bounds one Postgres check on the accept path (the queued-turn count) before intake fails open.
	CheckTimeoutDefault = 500 * time.Millisecond
	// LookupTimeoutDefault bounds an API key lookup and multitask=reject's check (with the flush of
	// queued rows before it).
	LookupTimeoutDefault = time.Second
	// StatusTimeoutDefault bounds a status read, a cancel, a page of a session's turns and
	// multitask=interrupt's cancel of earlier turns.
	StatusTimeoutDefault = 2 * time.Second
	// KeyTTLDefault is how long a known API key is cached: a revoked key stops working within it.
	KeyTTLDefault = 30 * time.Second
	// KeyMissTTLDefault is how long an unknown key is cached, so a flood of bad keys does not
	// reach Postgres once per request.
	KeyMissTTLDefault = 5 * time.Second
	// KeyMissRateDefault is how many API key lookups that miss one replica makes per second (and
	// at once); beyond it keys not in the cache are answered 503 without a lookup.
	KeyMissRateDefault = 50
	// KeyMissPerClientDefault is how many API key lookups that miss one client address may cause
	// per second (and at once) on one replica; beyond it that address's uncached keys are answered
	// 429 without a lookup. Kept well under KeyMissRateDefault, so that no one address can spend the
	// replica's budget and lock out a real tenant's first request.
	KeyMissPerClientDefault = 5
	// keyMissClients bounds how many client addresses' budgets are held at once.
	keyMissClients = 10000
	// CacheEntriesDefault bounds the API key cache; a full cache is
	// cleared.
	CacheEntriesDefault = 100000
	// QueuedCountTTLDefault is how long a tenant's queued-turn count is reused.
	QueuedCountTTLDefault = time.Second
	// RateLeaseTTLDefault bounds how long a replica spends a leased chunk of a tenant's rate tokens.
	RateLeaseTTLDefault = 100 * time.Millisecond
)

// Limits of the API itself, which the OpenAPI document states.
const (
	// PageSizeDefault is the number of turns in a page of a session's turns without ?limit=.
	PageSizeDefault = 20
	// PageSizeMax is the largest ?limit= accepted.
	PageSizeMax = 100
	// IdempotencyKeyMaxLen is the longest Idempotency-Key accepted.
	IdempotencyKeyMaxLen = 255
)

// Config tunes the handler. Zero fields take the defaults named; intake.New passes the validated
// configuration of the TURNSTILE_* variables.
type Config struct {
	// WebhookAllowHTTP accepts http:// webhooks (TURNSTILE_NOTIFIER_ALLOW_HTTP); https only otherwise.
	WebhookAllowHTTP bool
	// Topic is the Kafka topic of the default agent's turns; another agent's is Topic.<agent>
	// (pkg/agents). Defaults to config.TopicDefault.
	Topic string
	// Agents is the current agents catalog. Defaults to the catalog of one default agent.
	Agents func() *agents.Catalog
	// BacklogAgeOf, when set, is one agent's backlog age; it wins over BacklogAge.
	BacklogAgeOf func(agent string) time.Duration
	// MaxBody bounds a POST's body in bytes. Defaults to config.MaxBodyDefault.
	MaxBody int64
	// DefaultDeadline is a turn's deadline when the request names none. Defaults to
	// config.DefaultDeadlineDefault.
	DefaultDeadline time.Duration
	// MinUsefulTime is the least time a turn must have left when it would start. Defaults to
	// config.MinUsefulTimeDefault.
	MinUsefulTime time.Duration
	// ProduceTimeout bounds the wait for Kafka's acknowledgement. Defaults to
	// config.ProduceTimeoutDefault.
	ProduceTimeout time.Duration
	// MaxBacklogAge refuses turns with 503 while BacklogAge reports more. Defaults to
	// config.MaxBacklogAgeDefault.
	MaxBacklogAge time.Duration
	// BacklogAge reports the current backlog age; nil means unknown, and intake admits.
	BacklogAge func() time.Duration
	// Quotas, when set, returns the quotas in force (pkg/quota; nil before the first read): a
	// tenant's rate_per_second replaces TenantRate, and a tenant past its token budget is
	// refused (budget-exhausted).
	Quotas func() *quota.Snapshot
	// TenantRate bounds each tenant's accepted turns per second (GCRA in Redis). Defaults to
	// config.TenantRateDefault.
	TenantRate int
	// TenantBurst is how many turns a tenant may post at once above its rate. Defaults to twice
	// TenantRate.
	TenantBurst int
	// MaxQueuedTurns bounds each tenant's queued turns. Defaults to config.MaxQueuedTurnsDefault.
	MaxQueuedTurns int
	// IdempotencyTTL is how long an idempotency record lives in Redis. Defaults to
	// config.IdempotencyTTLDefault.
	IdempotencyTTL time.Duration
	// RetryAfter is the base of a 503's jittered Retry-After and the Retry-After of the
	// queued-turn quota's 429. Defaults to config.RetryAfterDefault.
	RetryAfter time.Duration
	// AuthEnabled requires an API key on every request; off, every request is wire.DefaultTenant's.
	AuthEnabled bool
	// KeyPrefix starts intake's Redis keys. Defaults to config.KeyPrefixDefault.
	KeyPrefix string
	// Region is this region (TURNSTILE_REGION and the region map): the prefix of the turn and
	// session IDs intake mints, and what answers another region's IDs with 421. The zero value
	// is single-region mode.
	Region region.Local

	// RedisTimeout defaults to RedisTimeoutDefault.
	RedisTimeout time.Duration
	// CheckTimeout defaults to CheckTimeoutDefault.
	CheckTimeout time.Duration
	// LookupTimeout defaults to LookupTimeoutDefault.
	LookupTimeout time.Duration
	// StatusTimeout defaults to StatusTimeoutDefault.
	StatusTimeout time.Duration
	// KeyTTL defaults to KeyTTLDefault.
	KeyTTL time.Duration
	// KeyMissTTL defaults to KeyMissTTLDefault.
	KeyMissTTL time.Duration
	// KeyMissRate defaults to KeyMissRateDefault.
	KeyMissRate int
	// KeyMissPerClient defaults to KeyMissPerClientDefault.
	KeyMissPerClient int
	// TrustedProxies are the peers whose X-Forwarded-For names the client (config.TrustedProxies);
	// empty: the connection's peer is the client.
	TrustedProxies []netip.Prefix
	// CacheEntries defaults to CacheEntriesDefault.
	CacheEntries int
	// QueuedCountTTL defaults to QueuedCountTTLDefault.
	QueuedCountTTL time.Duration
	// RateLeaseTTL defaults to RateLeaseTTLDefault.
	RateLeaseTTL time.Duration
	// SchedulesMax is a tenant's most schedules (TURNSTILE_SCHEDULES_MAX). Defaults to
	// SchedulesMaxDefault.
	SchedulesMax int
}

func (c *Config) applyDefaults() {
	if c.Agents == nil {
		one := agents.FromConfig(config.Default())
		c.Agents = func() *agents.Catalog { return one }
	}
	def := func(p *time.Duration, d time.Duration) {
		if *p == 0 {
			*p = d
		}
	}
	defInt := func(p *int, d int) {
		if *p == 0 {
			*p = d
		}
	}
	if c.Topic == "" {
		c.Topic = config.TopicDefault
	}
	if c.KeyPrefix == "" {
		c.KeyPrefix = config.KeyPrefixDefault
	}
	if c.MaxBody == 0 {
		c.MaxBody = config.MaxBodyDefault
	}
	def(&c.DefaultDeadline, config.DefaultDeadlineDefault)
	def(&c.MinUsefulTime, config.MinUsefulTimeDefault)
	def(&c.ProduceTimeout, config.ProduceTimeoutDefault)
	def(&c.MaxBacklogAge, config.MaxBacklogAgeDefault)
	defInt(&c.TenantRate, config.TenantRateDefault)
	defInt(&c.TenantBurst, 2*c.TenantRate)
	defInt(&c.MaxQueuedTurns, config.MaxQueuedTurnsDefault)
	def(&c.IdempotencyTTL, config.IdempotencyTTLDefault)
	def(&c.RetryAfter, config.RetryAfterDefault)
	def(&c.RedisTimeout, RedisTimeoutDefault)
	def(&c.CheckTimeout, CheckTimeoutDefault)
	def(&c.LookupTimeout, LookupTimeoutDefault)
	def(&c.StatusTimeout, StatusTimeoutDefault)
	def(&c.KeyTTL, KeyTTLDefault)
	def(&c.KeyMissTTL, KeyMissTTLDefault)
	defInt(&c.KeyMissRate, KeyMissRateDefault)
	defInt(&c.KeyMissPerClient, KeyMissPerClientDefault)
	defInt(&c.CacheEntries, CacheEntriesDefault)
	def(&c.QueuedCountTTL, QueuedCountTTLDefault)
	def(&c.RateLeaseTTL, RateLeaseTTLDefault)
	defInt(&c.SchedulesMax, SchedulesMaxDefault)
}

// Producer is the part of a Kafka client the handler uses.
type Producer interface {
	Produce(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error))
}

// Deps are the handler's collaborators. Pool and Redis may be nil (or down): intake then fails open
// where it can (quotas, double-texting) and answers 503 where it cannot (status reads).
type Deps struct {
	Producer Producer
	Pool     *pgxpool.Pool
	Redis    redis.UniversalClient
	Signer   *streamtoken.Signer
	Recorder *record.Recorder
	// TopicID, when set, returns the ID of the turns topic as intake last saw it (the zero UUID
	// when it does not know it); each queued row records the ID read before its record was
	// produced, which names the topic incarnation the record went to (package redrive).
	TopicID func(topic string) uuid.UUID
	// EnsureTopic, when set, creates an agent's topic unless it exists; intake calls it once per
	// topic before the first record goes to it (agents added to a running installation).
	EnsureTopic func(ctx context.Context, topic string) error
	// Events, when set, publishes the terminal events of queued turns a cancel ends at once.
	Events   *streams.Publisher
	Log      *slog.Logger
	Registry prometheus.Registerer
}

// Handler serves the intake API.
type Handler struct {
	cfg Config
	d   Deps
	// store is nil without a pool: every check that needs Postgres then fails open or answers 503.
	store *turnstore.Store
	// schedules is nil without a pool: the schedules routes then answer 503.
	schedules *schedule.Store
	limiter   *redis_rate.Limiter
	idem      redis.Cmdable
	autopipe  io.Closer
	keys      *keyCache
	queued    queuedCounts
	leases    rateLeases
	requests  *prometheus.CounterVec
	failOpen  *prometheus.CounterVec
	produce   prometheus.Histogram
	now       func() time.Time

	// postAccepted is requests{post_turn, accepted}, looked up once: it is counted on every accept.
	postAccepted prometheus.Counter
	// accepted counts accepted turns by agent.
	accepted *prometheus.CounterVec
	// topics are the agents' topics known to exist (ensureTopic).
	topics sync.Map
}

// New returns a handler.
func New(cfg Config, d Deps) *Handler {
	cfg.applyDefaults()
	h := &Handler{
		cfg: cfg, d: d, now: time.Now,
		queued: queuedCounts{m: map[string]*queuedCount{}},
		leases: rateLeases{m: map[string]*rateLease{}},
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "turnstile_intake_requests_total",
			Help: "Intake requests by route and result (accepted, or the refusal's problem type).",
		}, []string{"route", "result"}),
		failOpen: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "turnstile_intake_fail_open_total",
			Help: "Checks intake skipped because their store did not answer (it admits rather than refuses), by check.",
		}, []string{"check"}),
		produce: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "turnstile_intake_produce_duration_seconds",
			Help: "Time from produce to Kafka acknowledgement.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}),
	}
	h.postAccepted = h.requests.WithLabelValues("post_turn", "accepted")
	h.accepted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "turnstile_intake_accepted_turns_total",
		Help: "Turns accepted (acknowledged by Kafka), by agent.",
	}, []string{"agent"})
	if d.Pool != nil {
		h.store = turnstore.New(d.Pool)
		h.schedules = schedule.NewStore(d.Pool)
	}
	h.keys = &keyCache{pool: d.Pool, cfg: &h.cfg, m: map[[32]byte]keyEntry{}, clients: map[netip.Prefix]*missBucket{}, now: time.Now}
	h.idem = d.Redis
	if c, ok := d.Redis.(*redis.Client); ok {
		// Autopipelining coalesces the SET NX of concurrent requests into one round trip, so the
		// idempotency record costs a request a share of a round trip rather than one of its own.
		if ap, err := c.AutoPipeline(); err == nil {
			h.idem, h.autopipe = ap, ap
		}
	}
	if d.Redis != nil {
		h.limiter = redis_rate.NewLimiter(rateRedis{d.Redis})
	}
	d.Registry.MustRegister(h.requests, h.failOpen, h.produce, h.accepted)
	return h
}

// Close releases the handler's Redis autopipeliner.
func (h *Handler) Close() error {
	if h.autopipe != nil {
		return h.autopipe.Close()
	}
	return nil
}

// Routes mounts the API and its OpenAPI document.
func (h *Handler) Routes(r chi.Router) {
	r.Get("/openapi.yaml", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		_, _ = w.Write(openapi.Spec)
	})
	r.Group(func(r chi.Router) {
		r.Use(h.placed, h.authenticate)
		r.Post("/v1/sessions", h.postSession)
		r.Post("/v1/sessions/{session_id}/turns", h.postTurn)
		r.Get("/v1/sessions/{session_id}/turns", h.listTurns)
		r.Get("/v1/turns/{turn_id}", h.getTurn)
		r.Get("/v1/turns/{turn_id}/notifications", h.getNotifications)
		r.Get("/v1/turns/{turn_id}/push-configs", h.listPushConfigs)
		r.Get("/v1/turns/{turn_id}/push-configs/{config_id}", h.getPushConfig)
		r.Put("/v1/turns/{turn_id}/push-configs/{config_id}", h.putPushConfig)
		r.Delete("/v1/turns/{turn_id}/push-configs/{config_id}", h.deletePushConfig)
		r.Post("/v1/turns/{turn_id}/cancel", h.cancelTurn)
		r.Post("/v1/sessions/{session_id}/stream-token", h.streamToken)
		r.Get("/v1/whoami", h.whoami)
		r.Post("/v1/schedules", h.createSchedule)
		r.Get("/v1/schedules", h.listSchedules)
		r.Get("/v1/schedules/{schedule_id}", h.getSchedule)
		r.Patch("/v1/schedules/{schedule_id}", h.updateSchedule)
		r.Delete("/v1/schedules/{schedule_id}", h.deleteSchedule)
		r.Get("/v1/agents", h.listAgents)
		r.Get("/v1/agents/{name}", h.getAgent)
	})
}
