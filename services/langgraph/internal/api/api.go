package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnstile-run/turnstile/pkg/apikey"
	"github.com/turnstile-run/turnstile/pkg/frontdoor"
	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/pkg/lifecycle"
	"github.com/turnstile-run/turnstile/pkg/region"
	"github.com/turnstile-run/turnstile/services/langgraph/internal/threads"
)

// Defaults of Config.
const (
	// KeepAliveDefault is the SSE comment interval of a stream that has nothing to say. The SDK
	// measures these intervals to tell a half-open connection from a quiet one.
	KeepAliveDefault = 15 * time.Second
	// MaxBodyDefault bounds a request body.
	MaxBodyDefault = 256 << 10
	// StoreTimeoutDefault bounds one thread-table statement or API-key lookup.
	StoreTimeoutDefault = 5 * time.Second
	// RetryAfterDefault is the base of the jittered Retry-After of a 503 this handler answers
	// itself (the thread table unreachable).
	RetryAfterDefault = 2 * time.Second
	// ThreadsMaxDefault is config.LangGraphThreadsMaxDefault: a tenant's most threads.
	ThreadsMaxDefault = 10000
	// MetadataMaxDefault is config.LangGraphMetadataMaxDefault: the largest thread metadata, in
	// bytes of its JSON.
	MetadataMaxDefault = 16 << 10
	// StoreItemsMaxDefault is config.LangGraphStoreItemsMaxDefault: a tenant's most store items.
	StoreItemsMaxDefault = 10000
	// StoreValueMaxDefault is config.LangGraphStoreValueMaxDefault: the largest store value, in
	// bytes of its JSON.
	StoreValueMaxDefault = 64 << 10
	// historyTurns is the most turns of a thread that state and history read.
	historyTurns = 1000
	// turnPage is the page size of those reads (intake's maximum).
	turnPage = 100
)

// defaultTenant is the tenant of every request with TURNSTILE_AUTH=off, as intake names it.
const defaultTenant = "default"

// Config configures the handler; zero fields take the defaults above.
type Config struct {
	// Assistants are the assistant IDs runs may name.
	Assistants []string
	// Describe, when set, describes an assistant (its graph, name, description) from the agent
	// catalog (pkg/agents); false leaves the assistant described by its ID.
	Describe func(assistantID string) (AssistantInfo, bool)
	// Agents, when set, is the agent catalog's side of the assistants (pkg/agents): the assistant
	// IDs it adds to Assistants (one per agent, its name), and the agent a run of an assistant goes
	// to (false: no such assistant). Without it every assistant of Assistants is the default agent.
	Agents AssistantAgents
	// Auth says whether API keys are required (TURNSTILE_AUTH=on).
	Auth bool
	// CORSOrigins may call every LangGraph route from a browser page
	// (TURNSTILE_LANGGRAPH_CORS_ORIGINS); "*" allows any, none allows only the same origin.
	CORSOrigins  []string
	KeepAlive    time.Duration
	MaxBody      int64
	StoreTimeout time.Duration
	RetryAfter   time.Duration
	// ThreadsMax is the most threads a tenant may have (TURNSTILE_LANGGRAPH_THREADS_MAX).
	ThreadsMax int
	// MetadataMax bounds a thread's metadata in bytes (TURNSTILE_LANGGRAPH_METADATA_MAX).
	MetadataMax int
	// StoreItemsMax is the most store items a tenant may have
	// (TURNSTILE_LANGGRAPH_STORE_ITEMS_MAX).
	StoreItemsMax int
	// StoreValueMax bounds a store item's value in bytes (TURNSTILE_LANGGRAPH_STORE_VALUE_MAX).
	StoreValueMax int
	// Version is the server version GET /info answers (pkg/app's build version). Defaults to
	// "unknown".
	Version string
	// Region is this region (TURNSTILE_REGION and the region map): minted thread IDs carry its
	// code (run IDs are turn IDs and carry it already), and another region's thread or run is
	// answered 421. The zero value is single-region mode.
	Region region.Local
}

func (c *Config) applyDefaults() {
	if c.Version == "" {
		c.Version = "unknown"
	}
	if c.KeepAlive <= 0 {
		c.KeepAlive = KeepAliveDefault
	}
	if c.MaxBody <= 0 {
		c.MaxBody = MaxBodyDefault
	}
	if c.StoreTimeout <= 0 {
		c.StoreTimeout = StoreTimeoutDefault
	}
	if c.RetryAfter <= 0 {
		c.RetryAfter = RetryAfterDefault
	}
	if c.ThreadsMax <= 0 {
		c.ThreadsMax = ThreadsMaxDefault
	}
	if c.MetadataMax <= 0 {
		c.MetadataMax = MetadataMaxDefault
	}
	if c.StoreItemsMax <= 0 {
		c.StoreItemsMax = StoreItemsMaxDefault
	}
	if c.StoreValueMax <= 0 {
		c.StoreValueMax = StoreValueMaxDefault
	}
}

// AssistantAgents resolves assistants to the catalog's agents. Implementations must be safe for
// concurrent use (the catalog reloads).
type AssistantAgents interface {
	// IDs are the assistant IDs the catalog adds.
	IDs() []string
	// AgentOf is the agent a run of assistantID goes to ("" for the default agent), and whether
	// assistantID is an assistant at all.
	AgentOf(assistantID string) (string, bool)
}

// Handler serves the LangGraph routes.
type Handler struct {
	cfg        Config
	assistants map[string]bool
	fd         *frontdoor.Client
	threads    *threads.Store
	pool       *pgxpool.Pool
	log        *slog.Logger
	corsPolicy *httpx.CORS

	requests *prometheus.CounterVec
	// unrouted counts the answers of a path or method no route serves, by family, method and
	// status: what clients want that is not served.
	unrouted *prometheus.CounterVec

	// Streams tracks the open run streams, joins and waits. Drain and Cut end them without an end
	// event, so each client rejoins (the SDK follows the stream's Location with Last-Event-ID): on
	// another replica after a drain, here after a cut (tests use it to cut connections mid-run).
	lifecycle.Streams
}

// New builds the handler. pool holds the thread table and, with auth on, the API keys.
func New(cfg Config, fd *frontdoor.Client, pool *pgxpool.Pool, log *slog.Logger, reg prometheus.Registerer) *Handler {
	cfg.applyDefaults()
	h := &Handler{
		cfg: cfg, assistants: map[string]bool{}, fd: fd, threads: threads.New(pool), pool: pool, log: log,
		corsPolicy: httpx.NewCORS(cfg.CORSOrigins, corsMethods, corsHeaders, corsExpose),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "turnstile_langgraph_requests_total",
			Help: "LangGraph API requests by route and outcome (ok, or the problem type answered).",
		}, []string{"route", "outcome"}),
		unrouted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "turnstile_langgraph_unrouted_total",
			Help: "LangGraph front door answers to a path (404) or method (405) no route serves, by path family, method and status.",
		}, []string{"family", "method", "code"}),
	}
	for _, a := range cfg.Assistants {
		h.assistants[a] = true
	}
	reg.MustRegister(h.requests, h.unrouted, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "turnstile_langgraph_streams",
		Help: "Open LangGraph run streams (runs/stream, joins, waits) on this replica.",
	}, func() float64 { return float64(h.Len()) }))
	return h
}

// Routes mounts LangGraph's paths. They do not overlap the native /v1 paths. Each of the
// Platform's path families is a sub-router of its own, so every path under it, served or not, is
// answered here: a CORS preflight, the CORS headers of every answer (a page reads a 404 or 405
// problem too), and the unrouted ones counted.
func (h *Handler) Routes(r chi.Router) {
	h.family(r, "/ok", func(r chi.Router) { r.Get("/", h.getOK) })
	h.family(r, "/info", func(r chi.Router) { r.Get("/", h.getInfo) })
	h.family(r, "/threads", func(r chi.Router) {
		r.Post("/", h.createThread)
		r.Post("/search", h.searchThreads)
		r.Group(func(r chi.Router) {
			r.Use(h.placed)
			const thread = "/{thread_id}"
			r.Get(thread, h.getThread)
			r.Delete(thread, h.deleteThread)
			r.Patch(thread, h.patchThread)
			r.Post(thread+"/copy", h.copyThread)
			r.Post(thread+"/state", h.updateState)
			r.Get(thread+"/state", h.getState)
			r.Post(thread+"/history", h.getHistory)
			r.Get(thread+"/runs", h.listRuns)
			r.Post(thread+"/runs", h.createRun)
			r.Post(thread+"/runs/stream", h.streamRun)
			r.Post(thread+"/runs/wait", h.waitRun)
			r.Get(thread+"/runs/{run_id}", h.getRun)
			r.Delete(thread+"/runs/{run_id}", h.deleteRun)
			r.Get(thread+"/runs/{run_id}/stream", h.joinStream)
			r.Get(thread+"/runs/{run_id}/join", h.joinRun)
			r.Post(thread+"/runs/{run_id}/cancel", h.cancelRun)
			r.Post(thread+"/runs/crons", h.createCron)
		})
	})
	h.family(r, "/runs", func(r chi.Router) {
		r.Post("/", h.createStatelessRun)
		r.Post("/stream", h.streamStatelessRun)
		r.Post("/wait", h.waitStatelessRun)
		h.cronRoutes(r)
	})
	h.family(r, "/store", h.storeRoutes)
	h.family(r, "/assistants", func(r chi.Router) {
		r.Post("/search", h.searchAssistants)
		r.Get("/{assistant_id}", h.getAssistant)
		r.Get("/{assistant_id}/graph", h.getGraph)
		r.Get("/{assistant_id}/schemas", h.getSchemas)
	})
	// The Platform's family this front door does not serve: answered 404 with CORS, so the SDK
	// reads the problem instead of a CORS failure.
	h.family(r, "/crons", nil)
}

// family mounts a sub-router at prefix holding routes (none: every path is a 404).
func (h *Handler) family(r chi.Router, prefix string, routes func(chi.Router)) {
	sub := chi.NewRouter()
	sub.Use(h.cors)
	notFound := h.unroutedAnswer(prefix, http.StatusNotFound, httpx.NotFound)
	sub.NotFound(notFound)
	sub.MethodNotAllowed(h.unroutedAnswer(prefix, http.StatusMethodNotAllowed, httpx.MethodNotAllowed))
	if routes != nil {
		routes(sub)
	} else {
		// A mux without routes skips its middleware; this route keeps CORS on its 404s.
		sub.HandleFunc("/*", notFound)
	}
	r.Mount(prefix, sub)
}

// unroutedAnswer answers with answer (which writes code) a request no route of family serves,
// counts it and logs its method and path at debug level. The metric's labels stay bounded: the
// family, a known method or "other", the status; the path is only logged.
func (h *Handler) unroutedAnswer(family string, code int, answer http.HandlerFunc) http.HandlerFunc {
	status := strconv.Itoa(code)
	return func(w http.ResponseWriter, r *http.Request) {
		method := r.Method
		if !knownMethods[method] {
			method = "other"
		}
		h.unrouted.WithLabelValues(family, method, status).Inc()
		h.log.DebugContext(r.Context(), "langgraph unrouted", "method", r.Method, "path", r.URL.Path, "code", code)
		answer(w, r)
	}
}

// knownMethods are the method label values of turnstile_langgraph_unrouted_total.
var knownMethods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true,
	http.MethodPatch: true, http.MethodDelete: true, http.MethodOptions: true,
}

// Access-Control-* lists of every LangGraph route. The SDK sends its key as x-api-key (or a
// Bearer header), Last-Event-ID on a rejoin, Idempotency-Key, and whatever x-* headers the
// application adds ("*", which never covers Authorization, so that is named); it reads a
// stream's Content-Location and Location to rejoin, Retry-After to back off, and the x-* headers
// an answer carries.
const (
	corsMethods = "GET, POST, PUT, PATCH, DELETE, OPTIONS"
	corsHeaders = "Authorization, Content-Type, X-Api-Key, Last-Event-ID, Idempotency-Key, *"
	corsExpose  = "Content-Location, Location, Retry-After, WWW-Authenticate, *"
)

// cors answers a preflight and marks every other answer readable by an allowed origin.
func (h *Handler) cors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodOptions {
			h.corsPolicy.Preflight(w, r)
			return
		}
		h.corsPolicy.Allow(w, r)
		next.ServeHTTP(w, r)
	})
}

// placed answers 421 for a path naming another region's thread (a prefix of the region map) or
// run (by its shape), before the key is checked or any store read (pkg/region).
func (h *Handler) placed(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if owner, misdirected := h.cfg.Region.Misdirected(chi.URLParam(r, "thread_id"), chi.URLParam(r, "run_id")); misdirected {
			h.refuse(w, "misdirected", region.Misdirected(owner))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// caller is who a request comes from: the credential forwarded to the native API and the tenant
// that names its threads.
type caller struct {
	cred   frontdoor.Credential
	tenant string
}

// authenticate reads the caller's API key (x-api-key, as the SDK sends it, or a Bearer header) and
// resolves its tenant. With auth off every caller is the default tenant and its key, if any, is
// forwarded for intake to ignore.
func (h *Handler) authenticate(r *http.Request) (caller, *httpx.Problem) {
	key := strings.TrimSpace(r.Header.Get("X-Api-Key"))
	if key == "" {
		key = httpx.BearerToken(r)
	}
	var c caller
	if key != "" {
		c.cred = frontdoor.Credential("Bearer " + key)
	}
	if !h.cfg.Auth {
		c.tenant = defaultTenant
		return c, nil
	}
	if key == "" || !apikey.WellFormed(key) {
		p := httpx.ProblemUnauthenticated.Problem("an API key is required: send it as x-api-key (the LangGraph SDK's apiKey) or Authorization: Bearer")
		return c, &p
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.StoreTimeout)
	defer cancel()
	k, err := apikey.Resolve(ctx, h.pool, key)
	switch {
	case errors.Is(err, apikey.ErrUnknown):
		p := httpx.ProblemUnauthenticated.Problem("unknown or revoked API key")
		return c, &p
	case err != nil:
		h.log.WarnContext(r.Context(), "api key lookup failed", "err", err)
		p := h.storeDown("the API key cannot be checked now")
		return c, &p
	}
	c.tenant = k.Tenant
	return c, nil
}

func (h *Handler) storeDown(detail string) httpx.Problem {
	p := httpx.ProblemStoreUnavail.Problem(detail)
	p.RetryAfter = httpx.Jitter(h.cfg.RetryAfter)
	return p
}

// refuse answers a problem of this handler's own and counts it.
func (h *Handler) refuse(w http.ResponseWriter, route string, p httpx.Problem) {
	h.requests.WithLabelValues(route, p.Type).Inc()
	httpx.WriteProblem(w, p)
}

// relay answers an error of the native API: its own problem document as is, so status, type and
// Retry-After reach the client unchanged.
func (h *Handler) relay(w http.ResponseWriter, r *http.Request, route string, err error) {
	var p *frontdoor.Problem
	if errors.As(err, &p) {
		h.requests.WithLabelValues(route, p.Type).Inc()
		p.Write(w)
		return
	}
	h.log.WarnContext(r.Context(), "native api call failed", "route", route, "err", err)
	h.refuse(w, route, h.storeDown("the native API did not answer"))
}

func (h *Handler) ok(route string) { h.requests.WithLabelValues(route, "ok").Inc() }

// decodeBody reads a JSON request body into v; an empty body leaves v as it is. Like the Platform,
// it reads the body as JSON whether or not it is labelled so: unlabelled (a proxy such as
// agent-chat-ui's /api passthrough drops Content-Type) or text/plain (what fetch labels a string
// body with) is parsed, and a body that is not JSON is a 400. A body declared as another type
// (a form, multipart) is a 415.
func (h *Handler) decodeBody(w http.ResponseWriter, r *http.Request, v any) *httpx.Problem {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && mt != "text/plain" && !strings.HasSuffix(mt, "+json")) {
			p := httpx.ProblemUnsupportedType.Problem("send the body as application/json")
			return &p
		}
	}
	body, err := io.ReadAll(httpx.LimitBody(w, r, h.cfg.MaxBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			p := httpx.ProblemBodyTooLarge.Problem(fmt.Sprintf("the body is over %d bytes", h.cfg.MaxBody))
			return &p
		}
		p := httpx.ProblemInvalidBody.Problem("the body could not be read")
		return &p
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		return nil
	}
	if err := json.Unmarshal(body, v); err != nil {
		p := httpx.ProblemInvalidBody.Problem("the body is not the JSON object this route takes: " + err.Error())
		return &p
	}
	return nil
}
