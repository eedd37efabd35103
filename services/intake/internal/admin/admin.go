package admin

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/pkg/region"
	"github.com/turnstile-run/turnstile/pkg/streams"
	"github.com/turnstile-run/turnstile/pkg/streamtoken"
	"github.com/turnstile-run/turnstile/pkg/wire"
	"github.com/turnstile-run/turnstile/services/intake/internal/api"
)

// Defaults and limits of the API.
const (
	// PageSizeDefault is the number of turns in a page without ?limit=.
	PageSizeDefault = 50
	// PageSizeMax is the largest ?limit=.
	PageSizeMax = 500
	// TimeoutDefault bounds one request's statements.
	TimeoutDefault = 5 * time.Second
	// timelineEventsMax bounds the stream entries a timeline reads.
	timelineEventsMax = 10000
)

// Submitter produces a turn through intake's path (api.Handler).
type Submitter interface {
	Submit(ctx context.Context, env wire.Envelope) error
	FlushQueued(ctx context.Context)
	// Agent is the catalog's name of the agent name names ("" for the default), if it has one.
	Agent(name string) (string, bool)
}

// Config tunes the API.
type Config struct {
	// Region is this region's code (empty in single-region mode): turn IDs are shown with it.
	Region string
	// KeyPrefix starts the Redis keys (config.KeyPrefixDefault's shape), for a turn's events.
	KeyPrefix string
	// DefaultDeadline is a replay's deadline from its submission.
	DefaultDeadline time.Duration
	// Timeout defaults to TimeoutDefault.
	Timeout time.Duration
	// PresenceInterval is the workers' presence interval (config.WorkerPresenceIntervalDefault by
	// default): a worker is alive while its row is younger than three.
	PresenceInterval time.Duration
	// Prices are the models' token prices (TURNSTILE_MODEL_PRICES): usage rows of a priced model
	// report their cost.
	Prices map[string]config.Price
}

// Deps are the API's collaborators. Redis and Events may be nil: a timeline then has no events
// and a queued turn's cancel publishes no terminal event (its row says cancelled all the same).
type Deps struct {
	Pool   *pgxpool.Pool
	Redis  redis.UniversalClient
	Events *streams.Publisher
	Submit Submitter
	// Signer mints the stream grants of GET …/stream-token; nil answers that route 503.
	Signer *streamtoken.Signer
	// Authenticate resolves the request's key (api.Handler.Authenticate).
	Authenticate func(http.Handler) http.Handler
	// Kick, when set, tells the local job runner a job was created.
	Kick func()
	// Settings is the configuration view of this process (config.View), for GET /v1/admin/config.
	Settings func() []config.Setting
	Log      *slog.Logger
}

// Handler serves /v1/admin/….
type Handler struct {
	cfg Config
	d   Deps
}

// New returns the admin API.
func New(cfg Config, d Deps) *Handler {
	if cfg.Timeout == 0 {
		cfg.Timeout = TimeoutDefault
	}
	if cfg.PresenceInterval == 0 {
		cfg.PresenceInterval = config.WorkerPresenceIntervalDefault
	}
	return &Handler{cfg: cfg, d: d}
}

// Routes mounts the API.
func (h *Handler) Routes(r chi.Router) {
	r.Route("/v1/admin", func(r chi.Router) {
		r.Use(h.d.Authenticate, h.needStore)
		r.Get("/turns", h.searchTurns)
		r.Get("/dead-letters", h.deadLetters)
		r.Get("/turns/{turn_id}", h.getTurn)
		r.Get("/turns/{turn_id}/timeline", h.timeline)
		r.Get("/turns/{turn_id}/blockers", h.blockers)
		r.Post("/turns/{turn_id}/cancel", h.cancelTurn)
		r.Post("/turns/{turn_id}/replay", h.replayTurn)
		r.Post("/turns/{turn_id}/stream-token", h.streamToken)
		r.Get("/backlog", h.backlog)
		r.Get("/workers", h.workers)
		r.Post("/workers/{identity}/drain", h.drainWorker)
		r.Get("/pauses", h.listPauses)
		r.Post("/pauses", h.pause)
		r.Post("/pauses/resume", h.resume)
		r.Get("/config", h.configView)
		r.Get("/jobs", h.listJobs)
		r.Post("/jobs", h.createJob)
		r.Get("/jobs/{job_id}", h.getJob)
		r.Post("/jobs/{job_id}/cancel", h.cancelJob)
		r.Get("/audit", h.audit)
		r.Get("/quotas", h.listQuotas)
		r.Put("/quotas/{tenant}", h.putQuota)
		r.Delete("/quotas/{tenant}", h.deleteQuota)
		r.Get("/usage", h.usage)
	})
}

// needStore answers 503 while no pool exists: every route reads Postgres.
func (h *Handler) needStore(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.d.Pool == nil {
			refuse(w, httpx.ProblemStoreUnavail.Problem("the admin API needs Postgres"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// principal is the request's (api.Authenticate put it there).
func principal(r *http.Request) api.Principal {
	p, _ := api.PrincipalOf(r.Context())
	return p
}

// scope is the tenant a request may see, "" for every tenant (an admin's).
func scope(r *http.Request) string {
	p := principal(r)
	if p.Admin {
		return ""
	}
	return p.Tenant
}

// refuse writes p; a 503 carries a Retry-After.
func refuse(w http.ResponseWriter, p httpx.Problem) {
	if p.Status == http.StatusServiceUnavailable && p.RetryAfter == 0 {
		p.RetryAfter = httpx.Jitter(2 * time.Second)
	}
	httpx.WriteProblem(w, p)
}

// storeFault answers a failed statement: 503, logged.
func (h *Handler) storeFault(w http.ResponseWriter, r *http.Request, what string, err error) {
	if errors.Is(err, context.Canceled) {
		return
	}
	h.d.Log.WarnContext(r.Context(), "admin: "+what+" failed", "err", err)
	refuse(w, httpx.ProblemStoreUnavail.Problem(what+" is temporarily unavailable; retry"))
}

// showID is a stored turn ID as the admin API shows it: prefixed by the region.
func (h *Handler) showID(id uuid.UUID) string { return region.Prefix(h.cfg.Region, id.String()) }

// parseID reads a turn or job ID: a bare UUID or this region's "<code>-<uuid>".
func (h *Handler) parseID(s string) (uuid.UUID, bool) {
	code, id, err := region.ParseUUID(s)
	if err != nil || (code != "" && code != h.cfg.Region) || id == uuid.Nil {
		return uuid.Nil, false
	}
	return id, true
}

// readJSON decodes a request body of at most 64 KiB into v; an empty body leaves v as it is.
func readJSON(w http.ResponseWriter, r *http.Request, v any) *httpx.Problem {
	body := httpx.LimitBody(w, r, 64<<10)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		p := httpx.ProblemInvalidBody.Problem("the body must be a JSON object of the documented fields: " + err.Error())
		return &p
	}
	return nil
}
