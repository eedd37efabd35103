package admission

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

// Refusal says which cap refused a stream; the empty Refusal admits it. Its text is the reason
// label of the metrics and the gateway's open hooks.
type Refusal string

// Refusals.
const (
	// OverCapacity refuses a stream of a process, or a session, that has as many streams as its
	// cap allows.
	OverCapacity Refusal = "over_capacity"
	// OverTenantShare refuses a stream of a tenant that holds its share of the process's cap.
	OverTenantShare Refusal = "over_tenant_share"
)

// The front doors, as the door label of the metrics names them.
const (
	DoorGateway   = "gateway"
	DoorA2A       = "a2a"
	DoorAISDK     = "aisdk"
	DoorLangGraph = "langgraph"
)

// TicketHeader carries a front door's admitted slot (Slot.Ticket) on the request of the gateway
// stream that backs it. A gateway sharing the front door's Budget (one process) lets that stream
// ride on the slot instead of counting it twice; any other gateway does not know the ticket and
// counts the stream as its own.
const TicketHeader = "X-Turnstile-Admission"

// RetryDefault is the base of the jittered Retry-After of a refusal when Config.Retry is zero.
const RetryDefault = 5 * time.Second

// Problem is a refusal's answer on a route that may answer non-200: over the cap 503, over the
// tenant's share 429 (a quota of the tenant, as intake's are), each with a jittered Retry-After
// around retry. The gateway's event stream answers inside a 200 instead (EventSource gives up on
// any other status).
func (r Refusal) Problem(retry time.Duration) httpx.Problem {
	var p httpx.Problem
	if r == OverTenantShare {
		p = httpx.ProblemTenantStreamShare.Problem("the tenant holds its share of this replica's open streams; retry later")
	} else {
		p = httpx.ProblemOverCapacity.Problem("this replica holds as many open streams as it may; retry later")
	}
	p.RetryAfter = httpx.Jitter(retry)
	return p
}

// Status is the HTTP status of Problem: 429 over the tenant's share, else 503.
func (r Refusal) Status() int {
	if r == OverTenantShare {
		return http.StatusTooManyRequests
	}
	return http.StatusServiceUnavailable
}

// Config sets a budget's caps.
type Config struct {
	// MaxStreams caps the process's open streams, every door's together. At least 1.
	MaxStreams int
	// MaxPerSession caps one session's open streams. At least 1.
	MaxPerSession int
	// TenantShare is the percentage of MaxStreams one tenant's streams may hold (at least one
	// stream), for streams whose tenant is known.
	TenantShare int
	// Retry is the base of the jittered Retry-After of a refusal. Defaults to RetryDefault.
	Retry time.Duration
}

// Budget counts the long-lived streams of every front door of a process against its caps: one
// Budget a process (pkg/app's Deps.Admission), shared by its roles. Safe for concurrent use.
type Budget struct {
	cfg       Config
	maxTenant int // the tenant share of MaxStreams, in streams

	mu         sync.Mutex
	open       int
	perSession map[wire.SessionKey]int
	perTenant  map[string]int
	tickets    map[string]*Slot

	m Metrics
}

// Metrics are a budget's collectors (docs/METRICS.md), registered by Register.
type Metrics struct {
	// Admitted counts admitted streams by door; Refused refused ones by door and reason.
	Admitted, Refused *prometheus.CounterVec
	// Open counts the streams holding a slot, by door.
	Open *prometheus.GaugeVec
	// Backing counts gateway streams that rode on a front door's slot, by that front door.
	Backing *prometheus.CounterVec
}

// New returns a budget of cfg's caps. Its metrics are registered with Register.
func New(cfg Config) *Budget {
	cfg.MaxStreams = max(1, cfg.MaxStreams)
	cfg.MaxPerSession = max(1, cfg.MaxPerSession)
	if cfg.Retry <= 0 {
		cfg.Retry = RetryDefault
	}
	m := Metrics{
		Admitted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "turnstile_streams_admitted_total",
			Help: "Long-lived streams admitted under the process's caps, by front door.",
		}, []string{"door"}),
		Refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "turnstile_streams_refused_total",
			Help: "Long-lived streams refused by the process's caps, by front door and reason (over_capacity, over_tenant_share).",
		}, []string{"door", "reason"}),
		Open: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "turnstile_streams_open",
			Help: "Open long-lived streams counted against the process's caps, by front door.",
		}, []string{"door"}),
		Backing: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "turnstile_streams_backing_total",
			Help: "Gateway streams opened for a front door's stream of the same process, counted once under the front door's slot.",
		}, []string{"door"}),
	}
	// Every door and reason has a series from the start, so a rate over it is 0 rather than absent.
	for _, door := range []string{DoorGateway, DoorA2A, DoorAISDK, DoorLangGraph} {
		for _, reason := range []Refusal{OverCapacity, OverTenantShare} {
			m.Refused.WithLabelValues(door, string(reason))
		}
	}
	return &Budget{
		cfg: cfg, maxTenant: max(1, cfg.MaxStreams*cfg.TenantShare/100), m: m,
		perSession: map[wire.SessionKey]int{}, perTenant: map[string]int{}, tickets: map[string]*Slot{},
	}
}

// Register registers the budget's metrics on reg.
func (b *Budget) Register(reg prometheus.Registerer) {
	reg.MustRegister(b.m.Admitted, b.m.Refused, b.m.Open, b.m.Backing)
}

// Metrics returns the budget's collectors.
func (b *Budget) Metrics() Metrics { return b.m }

// Retry is the base of a refusal's jittered retry hint.
func (b *Budget) Retry() time.Duration { return b.cfg.Retry }

// Slot is one admitted stream's place under the caps, held until Release.
type Slot struct {
	b            *Budget
	door, tenant string
	session      wire.SessionKey
	ticket       string
	once         sync.Once
}

// Admit counts a stream of door on session and tenant ("" when the tenant is not known: no tenant
// share applies), or says which cap refuses it. An admitted stream's Slot is released once the
// stream ended, parked or not.
func (b *Budget) Admit(door string, session wire.SessionKey, tenant string) (*Slot, Refusal) {
	b.mu.Lock()
	refusal := Refusal("")
	switch {
	case b.open >= b.cfg.MaxStreams, b.perSession[session] >= b.cfg.MaxPerSession:
		refusal = OverCapacity
	case tenant != "" && b.perTenant[tenant] >= b.maxTenant:
		refusal = OverTenantShare
	}
	if refusal != "" {
		b.mu.Unlock()
		b.m.Refused.WithLabelValues(door, string(refusal)).Inc()
		return nil, refusal
	}
	b.open++
	b.perSession[session]++
	if tenant != "" {
		b.perTenant[tenant]++
	}
	b.mu.Unlock()
	b.m.Admitted.WithLabelValues(door).Inc()
	b.m.Open.WithLabelValues(door).Inc()
	return &Slot{b: b, door: door, session: session, tenant: tenant}, ""
}

// Release gives back the slot of a stream that ended. Only the first call counts.
func (s *Slot) Release() {
	if s == nil {
		return
	}
	s.once.Do(func() {
		b := s.b
		b.mu.Lock()
		b.open--
		if b.perSession[s.session]--; b.perSession[s.session] <= 0 {
			delete(b.perSession, s.session)
		}
		if s.tenant != "" {
			if b.perTenant[s.tenant]--; b.perTenant[s.tenant] <= 0 {
				delete(b.perTenant, s.tenant)
			}
		}
		if s.ticket != "" {
			delete(b.tickets, s.ticket)
		}
		b.mu.Unlock()
		b.m.Open.WithLabelValues(s.door).Dec()
	})
}

// Ticket names the slot for TicketHeader, so the gateway stream that backs this stream in the same
// process rides on it (Backs). The ticket is random and lives until Release.
func (s *Slot) Ticket() string {
	b := s.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if s.ticket == "" {
		var raw [16]byte
		_, _ = rand.Read(raw[:])
		s.ticket = hex.EncodeToString(raw[:])
		b.tickets[s.ticket] = s
	}
	return s.ticket
}

// Backs reports whether ticket names a held slot of this budget for session: a
// stream opened with it is already counted, under the slot of the front door that opened it.
func (b *Budget) Backs(ticket string, session wire.SessionKey) bool {
	if ticket == "" {
		return false
	}
	b.mu.Lock()
	s, ok := b.tickets[ticket]
	b.mu.Unlock()
	if !ok || s.session != session {
		return false
	}
	b.m.Backing.WithLabelValues(s.door).Inc()
	return true
}

// Open counts the admitted streams not yet released.
func (b *Budget) Open() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.open
}
