package quota

import "sync"

// Counter counts one worker's running turns per tenant and tenant×agent and decides, against a
// Watcher's snapshot, whether a tenant may start one more. Its Limiter(agent) is the per-lane
// limiter the worker's consumers take. Safe for concurrent use; its methods only touch memory.
type Counter struct {
	w *Watcher

	mu    sync.Mutex
	local map[Key]int
	// atRefresh is local as it was when the snapshot in force was read: the snapshot's running
	// counts include those turns (roughly), so the other replicas' share is the snapshot's count
	// less these.
	atRefresh map[Key]int
	snap      *Snapshot
}

// NewCounter returns a counter over w's snapshots; it follows w's refreshes.
func NewCounter(w *Watcher) *Counter {
	c := &Counter{w: w, local: map[Key]int{}, atRefresh: map[Key]int{}}
	w.OnRefresh(func(s *Snapshot) {
		c.mu.Lock()
		c.snap = s
		clear(c.atRefresh)
		for k, n := range c.local {
			c.atRefresh[k] = n
		}
		c.mu.Unlock()
	})
	return c
}

// admit counts a start of tenant's turn on agent if neither cap forbids it.
func (c *Counter) admit(tenant, agent string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	kt, ka := Key{Tenant: tenant}, Key{Tenant: tenant, Agent: agent}
	for _, k := range []Key{kt, ka} {
		limit, ok := c.snap.MaxRunning(k)
		if !ok {
			continue
		}
		others := max(c.snap.Running[k]-c.atRefresh[k], 0)
		if others+c.local[k] >= limit {
			return false
		}
	}
	c.local[kt]++
	c.local[ka]++
	return true
}

func (c *Counter) done(tenant, agent string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range []Key{{Tenant: tenant}, {Tenant: tenant, Agent: agent}} {
		if c.local[k] <= 1 {
			delete(c.local, k)
		} else {
			c.local[k]--
		}
	}
}

// Limiter is the counter's limiter for one agent's lane (it has consume.Limiter's methods).
func (c *Counter) Limiter(agent string) *Limiter { return &Limiter{c: c, agent: agent} }

// Limiter admits an agent's turns against its tenant's running caps.
type Limiter struct {
	c     *Counter
	agent string
}

// Admit counts the start of a turn of tenant, unless its tenant's or tenant×agent's running cap
// is reached.
func (l *Limiter) Admit(tenant string) bool { return l.c.admit(tenant, l.agent) }

// Done is told that an admitted turn ended.
func (l *Limiter) Done(tenant string) { l.c.done(tenant, l.agent) }
