package chat

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnstile-run/turnstile/pkg/frontdoor"
	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/pkg/lifecycle"
	"github.com/turnstile-run/turnstile/pkg/wire"
	"github.com/turnstile-run/turnstile/services/aisdk/internal/uistream"
)

// Defaults of Config.
const (
	// KeepAliveDefault is TURNSTILE_KEEPALIVE's default, the gateway's keep-alive interval.
	KeepAliveDefault = 15 * time.Second
	// WriteTimeoutDefault bounds one write to a client that stopped reading.
	WriteTimeoutDefault = 10 * time.Second
	// MaxBodyDefault is TURNSTILE_MAX_BODY's default.
	MaxBodyDefault = 256 << 10
	// HistoryLimitDefault is how many of a chat's turns the messages route returns, newest kept.
	HistoryLimitDefault = 500
)

// Config configures the handler; zero fields take the defaults above.
type Config struct {
	KeepAlive    time.Duration
	WriteTimeout time.Duration
	MaxBody      int64
	HistoryLimit int
}

func (c *Config) applyDefaults() {
	if c.KeepAlive <= 0 {
		c.KeepAlive = KeepAliveDefault
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = WriteTimeoutDefault
	}
	if c.MaxBody <= 0 {
		c.MaxBody = MaxBodyDefault
	}
	if c.HistoryLimit <= 0 {
		c.HistoryLimit = HistoryLimitDefault
	}
}

// Handler serves the chat routes. Its streams end when Drain is called; Wait waits for them.
type Handler struct {
	cfg Config
	fd  *frontdoor.Client
	log *slog.Logger

	requests *prometheus.CounterVec
	open     *prometheus.GaugeVec

	// Streams tracks the open streams: Drain cuts them (their clients see the connection drop and
	// resume), and new ones at once.
	lifecycle.Streams
}

// New builds the handler and registers its metrics on reg.
func New(cfg Config, fd *frontdoor.Client, log *slog.Logger, reg prometheus.Registerer) *Handler {
	cfg.applyDefaults()
	h := &Handler{
		cfg: cfg, fd: fd, log: log,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "turnstile_aisdk_requests_total",
			Help: "AI SDK chat requests by route and outcome (streamed, no_active_turn, refused, cut, failed).",
		}, []string{"route", "outcome"}),
		open: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "turnstile_aisdk_streams",
			Help: "Open UI message streams by route (post, resume).",
		}, []string{"route"}),
	}
	reg.MustRegister(h.requests, h.open)
	return h
}

// Routes mounts the chat routes.
func (h *Handler) Routes(r chi.Router) {
	r.Post("/v1/chat", h.post)
	r.Post("/v1/chat/{chat_id}", h.post)
	// An agent of the catalog by its path (the body's agent member does the same on the routes
	// above); an unknown one is intake's 404 agent-not-found, before anything reaches Kafka.
	r.Post("/v1/agents/{name}/chat", h.post)
	r.Post("/v1/agents/{name}/chat/{chat_id}", h.post)
	r.Get("/v1/chat/{chat_id}/stream", h.resume)
	r.Get("/v1/chat/{chat_id}/messages", h.messages)
}

// refuse answers a problem before any stream began: a native one as intake or the gateway wrote
// it, any other as a 503 the client may retry.
func (h *Handler) refuse(w http.ResponseWriter, route string, err error) {
	h.requests.WithLabelValues(route, "refused").Inc()
	var p *frontdoor.Problem
	if errors.As(err, &p) {
		p.Write(w)
		return
	}
	prob := httpx.ProblemStoreUnavail.Problem("the native API could not be reached")
	prob.RetryAfter = httpx.Jitter(2 * time.Second)
	httpx.WriteProblem(w, prob)
}

func (h *Handler) post(w http.ResponseWriter, r *http.Request) {
	const route = "post"
	t, p := readRequest(w, r, chi.URLParam(r, "chat_id"), chi.URLParam(r, "name"), h.cfg.MaxBody)
	if p != nil {
		h.requests.WithLabelValues(route, "refused").Inc()
		httpx.WriteProblem(w, *p)
		return
	}
	dl, err := frontdoor.ParseDeadline(r.Header.Get(frontdoor.DeadlineHeader))
	if err != nil {
		h.refuse(w, route, err)
		return
	}
	h.postTurn(w, r, t, dl)
}

func (h *Handler) postTurn(w http.ResponseWriter, r *http.Request, t turn, dl time.Time) {
	const route = "post"
	cred := frontdoor.CredentialOf(r)
	acc, err := h.fd.PostTurn(r.Context(), cred, t.chatID, frontdoor.TurnRequest{
		Input: wire.Input{Text: t.text}, Metadata: t.metadata, Multitask: t.multitask, Agent: t.agent,
	}, frontdoor.PostOptions{IdempotencyKey: t.idempotencyKey(), Deadline: dl})
	if err != nil {
		h.refuse(w, route, err)
		return
	}
	log := h.log.With("session_id", t.chatID, "turn_id", acc.TurnID, "agent", t.agent)
	h.stream(w, r, route, log, frontdoor.StreamRequest{SessionID: t.chatID, Token: acc.StreamToken, TurnID: acc.TurnID},
		acc.TurnID, uistream.Cursor{})
}

func (h *Handler) resume(w http.ResponseWriter, r *http.Request) {
	const route = "resume"
	chatID := chi.URLParam(r, "chat_id")
	if p := checkChatID(chatID); p != nil {
		h.requests.WithLabelValues(route, "refused").Inc()
		httpx.WriteProblem(w, *p)
		return
	}
	cur, err := uistream.ParseCursor(r.Header.Get("Last-Event-ID"))
	if err != nil {
		h.requests.WithLabelValues(route, "refused").Inc()
		httpx.WriteProblem(w, httpx.ProblemInvalidCursor.Problem(err.Error()))
		return
	}
	cred := frontdoor.CredentialOf(r)
	active, err := h.activeTurn(r.Context(), cred, chatID)
	if err != nil {
		h.refuse(w, route, err)
		return
	}
	if active == "" {
		h.requests.WithLabelValues(route, "no_active_turn").Inc()
		w.WriteHeader(http.StatusNoContent)
		return
	}
	grant, err := h.fd.StreamToken(r.Context(), cred, chatID)
	if err != nil {
		h.refuse(w, route, err)
		return
	}
	log := h.log.With("session_id", chatID, "turn_id", active)
	h.stream(w, r, route, log, frontdoor.StreamRequest{SessionID: chatID, Token: grant.StreamToken, TurnID: active}, active, cur)
}

// activeTurn is the chat's oldest turn that is not terminal, or "" when every turn is. The list is
// newest first; the next page is read only while the page's oldest turn is still active.
func (h *Handler) activeTurn(ctx context.Context, cred frontdoor.Credential, chatID string) (string, error) {
	const pageSize = 50
	active, cursor := "", ""
	for range h.cfg.HistoryLimit/pageSize + 1 {
		page, err := h.fd.ListTurns(ctx, cred, chatID, pageSize, cursor)
		if err != nil {
			var p *frontdoor.Problem
			if errors.As(err, &p) && p.Status == http.StatusNotFound {
				return "", nil
			}
			return "", err
		}
		for _, t := range page.Turns {
			if !t.Status.Terminal() {
				active = t.TurnID
			}
		}
		if page.NextCursor == "" || len(page.Turns) == 0 || page.Turns[len(page.Turns)-1].Status.Terminal() {
			break
		}
		cursor = page.NextCursor
	}
	return active, nil
}
