package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnstile-run/turnstile/pkg/agents"
	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/pkg/registry"
	"github.com/turnstile-run/turnstile/services/intake/internal/api"
)

// Knobs no variable sets.
const (
	// StoreTimeoutDefault bounds every statement of a request: a request never waits on Postgres
	// longer than this, it is answered 503 instead. Half the replica client's request timeout
	// (pkg/registry/client), so a replica hears the 503 rather than timing out.
	StoreTimeoutDefault = time.Second
	// RetryAfterDefault is the base of a shed request's jittered Retry-After.
	RetryAfterDefault = time.Second
	// maxBody bounds a registration's body.
	maxBody = 8 << 10
)

// Config tunes the handler. Zero fields take their defaults.
type Config struct {
	// Lease is a registration's lease. Defaults to config.RegistryLeaseDefault.
	Lease time.Duration
	// MaxInflight bounds the registry writes one intake serves at once; renewals and removals
	// may use all of it, registrations half; reads have a budget of their own, a quarter of it. A
	// request beyond is shed with 503 and Retry-After at once. Defaults to
	// config.RegistryMaxInflightDefault.
	MaxInflight int
	// StoreTimeout defaults to StoreTimeoutDefault.
	StoreTimeout time.Duration
	// RetryAfter defaults to RetryAfterDefault.
	RetryAfter time.Duration
	// Agents is the current catalog; a registration names one of its agents.
	Agents func() *agents.Catalog
}

func (c *Config) defaults() {
	if c.Lease <= 0 {
		c.Lease = config.RegistryLeaseDefault
	}
	if c.MaxInflight <= 0 {
		c.MaxInflight = config.RegistryMaxInflightDefault
	}
	if c.StoreTimeout <= 0 {
		c.StoreTimeout = StoreTimeoutDefault
	}
	if c.RetryAfter <= 0 {
		c.RetryAfter = RetryAfterDefault
	}
}

// Deps are the handler's collaborators.
type Deps struct {
	// Pool is Postgres; nil answers 503 to every request.
	Pool *pgxpool.Pool
	// Authenticate resolves the request's key (api.Handler.Authenticate).
	Authenticate func(http.Handler) http.Handler
	Log          *slog.Logger
	Registry     prometheus.Registerer
}

// Handler serves the registry's HTTP API (docs/REGISTRY.md) under /v1/agents/{name}/instances.
type Handler struct {
	cfg   Config
	d     Deps
	store *Store
	adm   admission // writes
	reads admission // reads: their own budget, so neither starves the other
	m     *handlerMetrics
}

// New returns the handler and registers its metrics.
func New(cfg Config, d Deps) *Handler {
	cfg.defaults()
	if d.Log == nil {
		d.Log = slog.Default()
	}
	h := &Handler{cfg: cfg, d: d, m: newHandlerMetrics(d.Registry)}
	if d.Pool != nil {
		h.store = NewStore(d.Pool)
	}
	h.adm = admission{max: int64(cfg.MaxInflight), low: int64(max(1, cfg.MaxInflight/2))}
	r := int64(max(2, cfg.MaxInflight/4))
	h.reads = admission{max: r, low: r}
	return h
}

// Store is the handler's store, nil without a pool.
func (h *Handler) Store() *Store { return h.store }

// Routes mounts the API.
func (h *Handler) Routes(r chi.Router) {
	r.Route("/v1/agents/{name}/instances", func(r chi.Router) {
		if h.d.Authenticate != nil {
			r.Use(h.d.Authenticate)
		}
		r.Use(h.gate)
		r.Post("/", h.admitted(opRegister, classLow, h.register))
		r.Get("/", h.admitted(opList, classRead, h.list))
		r.Get("/changes", h.admitted(opChanges, classRead, h.changes))
		r.Put("/{instance_id}", h.admitted(opRenew, classHigh, h.renew))
		r.Delete("/{instance_id}", h.admitted(opDeregister, classHigh, h.deregister))
	})
}

// Operations, as the requests metric labels them.
const (
	opRegister   = "register"
	opRenew      = "renew"
	opDeregister = "deregister"
	opList       = "list"
	opChanges    = "changes"
)

// gate refuses what no route may serve: a key that is not an admin's, an agent the catalog does
// not hold, a registry without Postgres.
func (h *Handler) gate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p, _ := api.PrincipalOf(r.Context()); !p.Admin && h.d.Authenticate != nil {
			httpx.WriteProblem(w, httpx.ProblemAdminRequired.Problem("the agent registry needs an admin's API key"))
			return
		}
		name := chi.URLParam(r, "name")
		if h.cfg.Agents != nil {
			if _, ok := h.cfg.Agents().Get(name); !ok || name == "" {
				httpx.WriteProblem(w, httpx.ProblemAgentNotFound.Problem(fmt.Sprintf("no agent named %q (GET /v1/agents lists them)", name)))
				return
			}
		}
		if h.store == nil {
			h.refuse(w, httpx.ProblemStoreUnavail.Problem("the agent registry needs Postgres"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// admitted runs fn when the admission of its class lets it in, and sheds it with 503 and a
// jittered Retry-After at once otherwise: a herd is refused, never queued into timeouts.
func (h *Handler) admitted(op string, c class, fn func(w http.ResponseWriter, r *http.Request) string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		adm := &h.adm
		if c == classRead {
			adm = &h.reads
		}
		if !adm.enter(c) {
			h.m.requests.WithLabelValues(op, "shed").Inc()
			h.refuse(w, httpx.ProblemOverCapacity.Problem("the agent registry is at its limit of requests in flight; retry after the Retry-After"))
			return
		}
		defer adm.leave()
		start := time.Now()
		result := fn(w, r)
		h.m.requests.WithLabelValues(op, result).Inc()
		h.m.latency.WithLabelValues(op).Observe(time.Since(start).Seconds())
	}
}

// refuse writes p; a 503 carries a jittered Retry-After.
func (h *Handler) refuse(w http.ResponseWriter, p httpx.Problem) {
	if p.Status == http.StatusServiceUnavailable && p.RetryAfter == 0 {
		p.RetryAfter = httpx.Jitter(h.cfg.RetryAfter)
	}
	httpx.WriteProblem(w, p)
}

// fault answers a failed statement with 503 and logs it.
func (h *Handler) fault(w http.ResponseWriter, r *http.Request, err error) string {
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		return "canceled"
	}
	h.d.Log.WarnContext(r.Context(), "agent registry: statement failed", "err", err, "agent", chi.URLParam(r, "name"))
	h.refuse(w, httpx.ProblemStoreUnavail.Problem("the agent registry cannot reach its store; retry"))
	return "error"
}

func (h *Handler) lease(agent, id string, epoch int64, exp time.Time) registry.Lease {
	return registry.Lease{
		Agent: agent, InstanceID: id, Epoch: epoch, ExpiresAt: exp,
		LeaseSeconds: h.cfg.Lease.Seconds(), HeartbeatSeconds: (h.cfg.Lease / 3).Seconds(),
	}
}

var (
	instanceRE = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)
	zoneRE     = regexp.MustCompile(`^[A-Za-z0-9._-]{0,64}$`)
	digestRE   = regexp.MustCompile(`^[A-Za-z0-9:+/=_-]{0,128}$`)
)

// validate returns every problem of reg.
func validate(reg registry.Registration) []string {
	var out []string
	if reg.InstanceID != "" && !instanceRE.MatchString(reg.InstanceID) {
		out = append(out, "instance_id: 1-128 characters of [A-Za-z0-9._:-]")
	}
	u, err := url.Parse(reg.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || len(reg.Endpoint) > 2048 {
		out = append(out, "endpoint: an http(s) URL of at most 2048 characters")
	}
	if !zoneRE.MatchString(reg.Zone) {
		out = append(out, "zone: at most 64 characters of [A-Za-z0-9._-]")
	}
	if !digestRE.MatchString(reg.CardDigest) {
		out = append(out, "card_digest: at most 128 characters such as sha256:<hex>")
	}
	return out
}

func (h *Handler) register(w http.ResponseWriter, r *http.Request) string {
	var reg registry.Registration
	dec := json.NewDecoder(httpx.LimitBody(w, r, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&reg); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			httpx.WriteProblem(w, httpx.ProblemBodyTooLarge.Problem(fmt.Sprintf("a registration is at most %d bytes", maxBody)))
			return "invalid"
		}
		if errors.Is(err, io.EOF) {
			err = errors.New("empty body")
		}
		httpx.WriteProblem(w, httpx.ProblemInvalidBody.Problem("the body must be a JSON registration: "+err.Error()))
		return "invalid"
	}
	if probs := validate(reg); len(probs) > 0 {
		p := httpx.ProblemValidation.Problem(strings.Join(probs, "; "))
		p.Extra = map[string]any{"errors": probs}
		httpx.WriteProblem(w, p)
		return "invalid"
	}
	if reg.InstanceID == "" {
		reg.InstanceID = uuid.Must(uuid.NewV7()).String()
	}
	agent := chi.URLParam(r, "name")
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.StoreTimeout)
	defer cancel()
	epoch, exp, err := h.store.Register(ctx, agent, reg, h.cfg.Lease)
	switch {
	case errors.Is(err, ErrTaken):
		httpx.WriteProblem(w, httpx.ProblemInstanceTaken.Problem(fmt.Sprintf(
			"instance %q is held by a live registration of another endpoint; a replaced replica stops", reg.InstanceID)))
		return "taken"
	case err != nil:
		return h.fault(w, r, err)
	}
	h.d.Log.InfoContext(r.Context(), "agent instance registered", "agent", agent, "instance", reg.InstanceID,
		"endpoint", reg.Endpoint, "zone", reg.Zone, "epoch", epoch)
	w.Header().Set("Location", "/v1/agents/"+agent+"/instances/"+url.PathEscape(reg.InstanceID))
	w.Header().Set("ETag", etag(epoch))
	httpx.WriteJSON(w, http.StatusCreated, h.lease(agent, reg.InstanceID, epoch, exp))
	return "ok"
}

func etag(epoch int64) string { return `"` + strconv.FormatInt(epoch, 10) + `"` }

// epochOf reads If-Match: the epoch, bare or quoted as the ETag of the registration gave it.
func epochOf(w http.ResponseWriter, r *http.Request) (int64, bool) {
	v := strings.TrimSpace(r.Header.Get("If-Match"))
	v = strings.TrimPrefix(v, "W/")
	v = strings.Trim(v, `"`)
	epoch, err := strconv.ParseInt(v, 10, 64)
	if err != nil || epoch <= 0 {
		httpx.WriteProblem(w, httpx.ProblemEpochRequired.Problem(`If-Match must carry the registration's epoch (If-Match: "<epoch>")`))
		return 0, false
	}
	return epoch, true
}

func (h *Handler) renew(w http.ResponseWriter, r *http.Request) string {
	epoch, ok := epochOf(w, r)
	if !ok {
		return "invalid"
	}
	agent, id := chi.URLParam(r, "name"), chi.URLParam(r, "instance_id")
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.StoreTimeout)
	defer cancel()
	exp, err := h.store.Renew(ctx, agent, id, epoch, h.cfg.Lease)
	switch {
	case errors.Is(err, ErrStale):
		httpx.WriteProblem(w, httpx.ProblemStaleEpoch.Problem(fmt.Sprintf(
			"instance %q holds no registration of epoch %d; register again", id, epoch)))
		return "stale"
	case err != nil:
		return h.fault(w, r, err)
	}
	w.Header().Set("ETag", etag(epoch))
	httpx.WriteJSON(w, http.StatusOK, h.lease(agent, id, epoch, exp))
	return "ok"
}

func (h *Handler) deregister(w http.ResponseWriter, r *http.Request) string {
	epoch, ok := epochOf(w, r)
	if !ok {
		return "invalid"
	}
	agent, id := chi.URLParam(r, "name"), chi.URLParam(r, "instance_id")
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.StoreTimeout)
	defer cancel()
	err := h.store.Deregister(ctx, agent, id, epoch)
	switch {
	case errors.Is(err, ErrStale):
		httpx.WriteProblem(w, httpx.ProblemStaleEpoch.Problem(fmt.Sprintf("instance %q holds no registration of epoch %d", id, epoch)))
		return "stale"
	case err != nil:
		return h.fault(w, r, err)
	}
	h.d.Log.InfoContext(r.Context(), "agent instance deregistered", "agent", agent, "instance", id, "epoch", epoch)
	w.WriteHeader(http.StatusNoContent)
	return "ok"
}

func (h *Handler) list(w http.ResponseWriter, r *http.Request) string {
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.StoreTimeout)
	defer cancel()
	out, err := h.store.List(ctx, chi.URLParam(r, "name"))
	if err != nil {
		return h.fault(w, r, err)
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return "ok"
}

func (h *Handler) changes(w http.ResponseWriter, r *http.Request) string {
	var since int64
	if s := r.URL.Query().Get("since"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < 0 {
			httpx.WriteProblem(w, httpx.ProblemInvalidCursor.Problem("since must be a revision (a non-negative integer)"))
			return "invalid"
		}
		since = v
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.StoreTimeout)
	defer cancel()
	out, err := h.store.Changes(ctx, chi.URLParam(r, "name"), since)
	if err != nil {
		return h.fault(w, r, err)
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return "ok"
}

// class is a request's admission priority.
type class int

const (
	// classHigh is a renewal or removal of a known registration: cheap, and what keeps the
	// snapshots right.
	classHigh class = iota
	// classLow is a new registration.
	classLow
	// classRead is a read (the workers' changes, a list): admitted within a budget of its own, a
	// quarter of the limit, so a herd of writes never starves the snapshots and reads never
	// crowd out renewals.
	classRead
)

// admission bounds the requests in flight: classHigh up to max, classLow up to low, so that in a
// herd the renewals of known instances are admitted before new registrations.
type admission struct {
	max, low int64
	inflight atomic.Int64
}

func (a *admission) enter(c class) bool {
	limit := a.max
	if c == classLow {
		limit = a.low
	}
	for {
		n := a.inflight.Load()
		if n >= limit {
			return false
		}
		if a.inflight.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (a *admission) leave() { a.inflight.Add(-1) }
