package forward

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/pkg/region"
	"github.com/turnstile-run/turnstile/pkg/streamtoken"
	"github.com/turnstile-run/turnstile/services/router/internal/route"
)

// Health is what the forwarder asks of the region health monitor (package health). Its methods
// must be safe for concurrent use and fast: Up is called on every request.
type Health interface {
	// Up reports whether the region is up.
	Up(code string) bool
	// Failed reports a forward to the region that could not connect or timed out.
	Failed(code string, err error)
}

// Config tunes a Handler; zero fields take pkg/config's defaults of the TURNSTILE_ROUTER_*
// settings.
type Config struct {
	// ConnectTimeout bounds dialling a region. Defaults to config.RouterConnectTimeoutDefault.
	ConnectTimeout time.Duration
	// RetryAfter is the base of the jittered Retry-After of a 503. Defaults to
	// config.RouterRetryAfterDefault.
	RetryAfter time.Duration
	// IdleConns is the idle keep-alive connections kept per region. Defaults to
	// config.RouterIdleConnsDefault.
	IdleConns int
	// MaxBody is the most of an A2A body read to find its owner (a longer one is forwarded whole
	// and goes to the tenant's home, whose answer is its 413). Defaults to config.MaxBodyDefault.
	MaxBody int64
}

func (c *Config) applyDefaults() {
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = config.RouterConnectTimeoutDefault
	}
	if c.RetryAfter <= 0 {
		c.RetryAfter = config.RouterRetryAfterDefault
	}
	if c.IdleConns <= 0 {
		c.IdleConns = config.RouterIdleConnsDefault
	}
	if c.MaxBody <= 0 {
		c.MaxBody = config.MaxBodyDefault
	}
}

// Outcomes of a request, the forwards metric's outcome label.
const (
	// OutcomeForwarded: sent to the owner (or the tenant's home) and answered, whatever the status.
	OutcomeForwarded = "forwarded"
	// OutcomeFailover: new work of a failover tenant sent to the next healthy region.
	OutcomeFailover = "failover"
	// OutcomeUnavailable: the owner was down; answered 503 without dialling.
	OutcomeUnavailable = "unavailable"
	// OutcomeError: the forward failed to connect or timed out; answered 503, region marked down.
	OutcomeError = "error"
	// OutcomeCanceled: the client went away (or the router drained) before the region answered.
	OutcomeCanceled = "canceled"
)

// Handler forwards every request to its owning region.
type Handler struct {
	cfg     Config
	regions *region.Map
	health  Health
	log     *slog.Logger
	proxies map[string]*httputil.ReverseProxy
	// transports' idle connections are closed by Close.
	transports []*http.Transport

	// closing ends with Close, and with it every forward in flight.
	closing context.Context //nolint:containedctx // the handler's lifetime, which every forward's context follows
	close   context.CancelFunc

	forwards *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

// New builds the handler for the regions of m; its metrics go to reg.
func New(cfg Config, m *region.Map, h Health, log *slog.Logger, reg prometheus.Registerer) (*Handler, error) {
	cfg.applyDefaults()
	fw := &Handler{
		cfg: cfg, regions: m, health: h, log: log, proxies: map[string]*httputil.ReverseProxy{},
		forwards: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "turnstile_router_forwards_total",
			Help: "Requests the router handled, by the region they were for and outcome (forwarded, failover, unavailable, error, canceled).",
		}, []string{"region", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "turnstile_router_forward_duration_seconds",
			Help:    "Time from a request's arrival at the router to its region's answer headers, by region.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"region"}),
	}
	fw.closing, fw.close = context.WithCancel(context.Background())
	for _, r := range m.Regions {
		u, err := url.Parse(r.URL)
		if err != nil {
			return nil, fmt.Errorf("region %s: parse url: %w", r.Code, err)
		}
		tr := fw.transport()
		fw.transports = append(fw.transports, tr)
		fw.proxies[r.Code] = fw.proxy(u, tr)
	}
	reg.MustRegister(fw.forwards, fw.latency)
	return fw, nil
}

// transport is one region's connection pool: a short connect timeout (a region that cannot be
// reached is answered 503 soon), no answer timeout (streams and long polls are the region's to
// bound), many idle keep-alive connections (forwarding reuses them instead of dialling), and no
// compression of its own (bodies pass as the region sent them).
func (fw *Handler) transport() *http.Transport {
	d := &net.Dialer{Timeout: fw.cfg.ConnectTimeout, KeepAlive: 30 * time.Second}
	return &http.Transport{
		DialContext:           d.DialContext,
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   fw.cfg.ConnectTimeout,
		MaxIdleConnsPerHost:   fw.cfg.IdleConns,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
		ReadBufferSize:        32 << 10,
		WriteBufferSize:       32 << 10,
	}
}

func (fw *Handler) proxy(u *url.URL, tr *http.Transport) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.SetXForwarded()
		},
		Transport:      tr,
		BufferPool:     copyBuffers,
		FlushInterval:  -1,
		ErrorLog:       slog.NewLogLogger(fw.log.Handler(), slog.LevelInfo),
		ModifyResponse: fw.answered,
		ErrorHandler:   fw.failed,
	}
}

// bufferPool lends ReverseProxy its body copy buffers, which it otherwise allocates (32 KiB) for
// every request.
type bufferPool struct{ p sync.Pool }

// Get lends a buffer.
func (b *bufferPool) Get() []byte {
	return *b.p.Get().(*[]byte)
}

// Put takes a buffer back.
func (b *bufferPool) Put(v []byte) {
	b.p.Put(&v)
}

var copyBuffers = &bufferPool{p: sync.Pool{New: func() any {
	b := make([]byte, 32<<10)
	return &b
}}}

// placement is where one request goes.
type placement struct {
	// owner is the region owning the request: its ID's, or its tenant's home.
	owner string
	// to is where it is forwarded: the owner, the next healthy region for a failover tenant's new
	// work, or "" when the owner is down.
	to       string
	failover bool
}

// place applies the owner rule and the tenant's policy to a request's ID (or its absence) and the
// ID of its API key.
func (fw *Handler) place(id, keyID string) placement {
	tenant := fw.regions.TenantOfKeyID(keyID)
	if id != "" {
		owner, ok := fw.regions.Owner(id)
		if !ok {
			owner = tenant.Home
		}
		p := placement{owner: owner}
		if fw.health.Up(owner) {
			p.to = owner
		}
		return p
	}
	p := placement{owner: tenant.Home}
	switch {
	case fw.health.Up(tenant.Home):
		p.to = tenant.Home
	case tenant.Policy == region.PolicyFailover:
		if next, ok := fw.regions.Next(tenant.Home, fw.health.Up); ok {
			p.to, p.failover = next.Code, true
		}
	}
	return p
}

// forward is one forwarded request's state, carried in its context to the proxy's hooks.
type forward struct {
	start time.Time
	place placement
	// rpcID is the JSON-RPC request's id on the A2A endpoint, nil elsewhere.
	rpc   bool
	rpcID json.RawMessage
}

type forwardKey struct{}

// ServeHTTP finds the request's owner and forwards it there, or answers 503 naming the owner.
func (fw *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f := &forward{start: time.Now()}
	id, rpc := route.Path(r.URL.Path)
	// The A2A JSON-RPC endpoint and the HTTP+JSON binding's message routes name their owner in
	// the body.
	if r.Method == http.MethodPost && (rpc || route.RESTMessage(r.URL.Path)) {
		body, err := peekBody(r, fw.cfg.MaxBody)
		if err != nil {
			fw.forwards.WithLabelValues("", OutcomeCanceled).Inc()
			return // the client's body broke off: nobody is left to answer
		}
		if rpc {
			f.rpc = true
			id, f.rpcID = route.JSONRPC(body)
		} else {
			id = route.RESTBody(body)
		}
	}
	f.place = fw.place(id, keyID(r))
	if f.place.to == "" {
		fw.forwards.WithLabelValues(f.place.owner, OutcomeUnavailable).Inc()
		fw.unavailable(w, f, f.place.owner)
		return
	}
	ctx, cancel := context.WithCancel(context.WithValue(r.Context(), forwardKey{}, f))
	defer cancel()
	stop := context.AfterFunc(fw.closing, cancel) //nolint:contextcheck // the handler's lifetime ends the forward too (Close); the request's context stays its parent
	defer stop()
	fw.proxies[f.place.to].ServeHTTP(w, r.WithContext(ctx))
}

// answered records a forward the region answered, whatever its status.
func (fw *Handler) answered(resp *http.Response) error {
	f, _ := resp.Request.Context().Value(forwardKey{}).(*forward)
	if f == nil {
		return nil
	}
	fw.latency.WithLabelValues(f.place.to).Observe(time.Since(f.start).Seconds())
	outcome := OutcomeForwarded
	if f.place.failover {
		outcome = OutcomeFailover
	}
	fw.forwards.WithLabelValues(f.place.to, outcome).Inc()
	return nil
}

// failed handles a forward that got no answer: the region could not be reached (it is marked down
// and the client told 503), or the client went away first (nobody to answer).
func (fw *Handler) failed(w http.ResponseWriter, r *http.Request, err error) {
	f, _ := r.Context().Value(forwardKey{}).(*forward)
	if f == nil {
		f = &forward{}
	}
	if r.Context().Err() != nil {
		fw.forwards.WithLabelValues(f.place.to, OutcomeCanceled).Inc()
		return
	}
	fw.forwards.WithLabelValues(f.place.to, OutcomeError).Inc()
	fw.health.Failed(f.place.to, err)
	fw.log.Warn("forward failed", "region", f.place.to, "method", r.Method, "path", r.URL.Path, "err", err)
	fw.unavailable(w, f, f.place.to)
}

// unavailable answers 503 naming the region that cannot be reached: a problem document, or on
// the A2A endpoint a JSON-RPC error.
func (fw *Handler) unavailable(w http.ResponseWriter, f *forward, code string) {
	retry := httpx.Jitter(fw.cfg.RetryAfter)
	if !f.rpc {
		httpx.WriteProblem(w, region.Unavailable(code, retry))
		return
	}
	id := f.rpcID
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	w.Header().Set("Retry-After", strconv.Itoa(int((retry+time.Second-1)/time.Second)))
	httpx.WriteJSON(w, http.StatusServiceUnavailable, map[string]any{
		"jsonrpc": "2.0", "id": id,
		"error": map[string]any{
			"code": region.RPCRegionUnavailable, "message": "region " + code + " is unavailable; retry later",
			"data": map[string]string{region.MemberRegion: code},
		},
	})
}

// Close ends every forward in flight and closes idle connections. Safe twice.
func (fw *Handler) Close() {
	fw.close()
	for _, tr := range fw.transports {
		tr.CloseIdleConnections()
	}
}

// keyID is the ID of the API key behind a request, where turnstile's clients put their
// credential: an API key in x-api-key (the LangGraph SDK) or a Bearer header, or a stream token
// (Bearer, or the access_token query of a browser's EventSource) naming the key it was issued to.
// Nothing is verified: the owning region does that. "" when the request names no key.
func keyID(r *http.Request) string {
	cred := strings.TrimSpace(r.Header.Get("X-Api-Key"))
	if cred == "" {
		cred = httpx.BearerToken(r)
	}
	if cred == "" && strings.Contains(r.URL.RawQuery, "access_token=") {
		cred = r.URL.Query().Get("access_token")
	}
	if id, ok := region.KeyID(cred); ok {
		return id
	}
	if c, ok := streamtoken.Unverified(cred); ok {
		return c.APIKeyID
	}
	return ""
}

// peekBody reads up to limit bytes of the request body to route by and puts them back in front of
// the rest, so the region receives the body exactly as sent.
func peekBody(r *http.Request, limit int64) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	buf, err := io.ReadAll(io.LimitReader(r.Body, limit))
	if err != nil {
		return nil, fmt.Errorf("read body: %w", err)
	}
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(buf), r.Body), r.Body}
	return buf, nil
}
