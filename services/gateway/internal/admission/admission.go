package admission

import (
	"sync"

	"github.com/turnstile-run/turnstile/pkg/wire"
)

// Refusal says which cap refused a stream; the empty Refusal admits it. Its text is the result
// label of the gateway's metrics and open hooks.
type Refusal string

// Refusals.
const (
	// OverCapacity refuses a stream of a replica, or a session, that has as many streams as its
	// cap allows.
	OverCapacity Refusal = "over_capacity"
	// OverTenantShare refuses a stream of a tenant that holds its share of the replica's cap.
	OverTenantShare Refusal = "over_tenant_share"
)

// Caps counts a replica's admitted streams against its caps. Safe for concurrent use.
type Caps struct {
	maxConnections int
	maxPerSession  int
	maxTenant      int // the tenant share of maxConnections, in streams

	mu         sync.Mutex
	open       int
	perSession map[wire.SessionKey]int
	perTenant  map[string]int
}

// New returns caps of maxConnections streams on the replica, maxPerSession on one session, and
// tenantSharePercent of maxConnections (at least one stream) for one tenant.
func New(maxConnections, maxPerSession, tenantSharePercent int) *Caps {
	return &Caps{
		maxConnections: maxConnections, maxPerSession: maxPerSession,
		maxTenant:  max(1, maxConnections*tenantSharePercent/100),
		perSession: map[wire.SessionKey]int{}, perTenant: map[string]int{},
	}
}

// Admit counts a stream of session and tenant ("" for a stream whose token names
// none, which no tenant share applies to), or says which cap refuses it. An admitted stream is
// released with Release once, with the same arguments.
func (c *Caps) Admit(session wire.SessionKey, tenant string) Refusal {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.open >= c.maxConnections, c.perSession[session] >= c.maxPerSession:
		return OverCapacity
	case tenant != "" && c.perTenant[tenant] >= c.maxTenant:
		return OverTenantShare
	}
	c.open++
	c.perSession[session]++
	if tenant != "" {
		c.perTenant[tenant]++
	}
	return ""
}

// Release gives back the slot of an admitted stream that ended.
func (c *Caps) Release(session wire.SessionKey, tenant string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.open--
	if c.perSession[session]--; c.perSession[session] <= 0 {
		delete(c.perSession, session)
	}
	if tenant != "" {
		if c.perTenant[tenant]--; c.perTenant[tenant] <= 0 {
			delete(c.perTenant, tenant)
		}
	}
}
