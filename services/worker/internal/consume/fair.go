package consume

import (
	"bytes"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/turnstile-run/turnstile/pkg/wire"
)

// Schedulers (Config.Scheduler).
const (
	// SchedulerFair starts the next turn of the tenant furthest behind its weighted share; the
	// default.
	SchedulerFair = "fair"
	// SchedulerArrival starts the oldest ready turn whatever its tenant, as if every turn were one
	// tenant's, and ignores priorities: the order before tenants were scheduled, kept to measure
	// fairness against (the fairness load test runs both).
	SchedulerArrival = "arrival"
)

// PriorityHeader is the record header that carries a turn's priority (wire.PriorityHeader). A
// record without it (or with a value out of range) has wire.PriorityDefault.
const PriorityHeader = wire.PriorityHeader

// Limiter decides whether a tenant may start one more turn now (its concurrency quota). Admit is
// asked before each start and, when it says yes, counts the start; Done is told when that turn
// ends. Both run under the consumer's lock, so they must be fast and must not call back into the
// consumer; they must be safe for concurrent use (one limiter may serve several consumers).
type Limiter interface {
	Admit(tenant string) bool
	Done(tenant string)
}

// tenant is one tenant's ready sessions in this consumer and its place in the fair order.
//
// The order is start-time fair queueing over tenants: each tenant has a virtual time vt that
// grows by 1/weight with each of its starts, and the next start goes to the ready tenant with the
// least vt — the one furthest behind its weighted share. A tenant that becomes ready after being
// idle starts from the consumer's current virtual time (the vt of the last start), not from its
// old one, so idleness earns no credit to burst with later.
type tenant struct {
	name   string
	weight float64
	vt     float64
	// parts holds the tenant's ready sessions per partition, each partition's heap highest
	// priority first, then oldest head record; next is where the round-robin between partitions
	// of equal priority resumes.
	parts []*tenantPart
	next  int
	// ready counts the entries of the heaps (a stale entry counts until it is popped); running
	// counts the tenant's turns running here; sessions counts its sessions in the session map
	// (the tenant is forgotten with its last).
	ready    int
	running  int
	sessions int
	// held: the limiter refused the tenant's last start; it is out of the active heap until a
	// turn of its ends here or Recheck is called.
	held bool
	// idx is the tenant's index in the active heap, -1 when it is not in it; seq breaks ties of
	// vt in activation order.
	idx int
	seq uint64
}

type tenantPart struct {
	ps    *partState
	ready readyHeap
}

// tenantOfLocked returns the tenant of a record's session key, creating it.
func (c *Consumer) tenantOfLocked(key []byte) *tenant {
	name := ""
	if c.cfg.Scheduler != SchedulerArrival {
		name = wire.DefaultTenant
		if i := bytes.IndexByte(key, wire.SessionKeySeparator[0]); i > 0 {
			name = string(key[:i])
		}
	}
	t := c.tenants[name]
	if t == nil {
		w := c.cfg.Weights[name]
		if w <= 0 {
			w = 1
		}
		t = &tenant{name: name, weight: w, idx: -1}
		c.tenants[name] = t
	}
	return t
}

// priorityOf is a record's priority from its header.
func (c *Consumer) priorityOf(rec *kgo.Record) int8 {
	if c.cfg.Scheduler == SchedulerArrival {
		return 0
	}
	for _, h := range rec.Headers {
		if h.Key == PriorityHeader {
			p, err := strconv.Atoi(string(h.Value))
			if err != nil || !wire.PriorityValid(p) {
				return wire.PriorityDefault
			}
			return int8(p)
		}
	}
	return wire.PriorityDefault
}

// readyLocked marks s (not running, its queue not empty) ready: its head record may start.
func (c *Consumer) readyLocked(s *session, ps *partState) {
	t := s.tenant
	var tp *tenantPart
	for _, p := range t.parts {
		if p.ps == ps {
			tp = p
			break
		}
	}
	if tp == nil {
		tp = &tenantPart{ps: ps}
		t.parts = append(t.parts, tp)
	}
	q := s.queue[0]
	tp.ready.push(readySession{s: s, offset: q.rec.Offset, prio: q.prio})
	t.ready++
	ps.ready++
	c.activateLocked(t)
}

// activateLocked puts t in the active heap if it has ready sessions and is not held.
func (c *Consumer) activateLocked(t *tenant) {
	if t.idx >= 0 || t.held || t.ready == 0 {
		return
	}
	t.vt = max(t.vt, c.vnow)
	c.tseq++
	t.seq = c.tseq
	c.active.push(t)
}

// peekLocked drops t's stale ready entries and returns the partition whose head session goes
// next (highest priority, round-robin between partitions on a tie), nil when none is ready.
func (t *tenant) peekLocked() *tenantPart {
	var best *tenantPart
	n := len(t.parts)
	for i := range n {
		tp := t.parts[(t.next+i)%n]
		for len(tp.ready) > 0 {
			top := tp.ready[0].s
			if !top.running && len(top.queue) > 0 && top.tenant == t {
				break
			}
			tp.ready.pop()
			t.ready--
			tp.ps.ready--
		}
		if len(tp.ready) > 0 && (best == nil || tp.ready[0].prio > best.ready[0].prio) {
			best = tp
		}
	}
	return best
}

// nextReadyLocked takes the next session to start: the head of the active heap's first tenant
// that the limiter admits. Tenants the limiter refuses are held (and their waiting turns
// announced); ps is nil when no session may start.
func (c *Consumer) nextReadyLocked() (*session, *partState) {
	for len(c.active) > 0 {
		t := c.active[0]
		tp := t.peekLocked()
		if tp == nil {
			c.active.remove(t)
			continue
		}
		if c.limiter != nil && !c.limiter.Admit(t.name) {
			c.active.remove(t)
			t.held = true
			c.announceHeldLocked(t)
			continue
		}
		s := tp.ready.pop().s
		t.ready--
		tp.ps.ready--
		for i, p := range t.parts {
			if p == tp {
				t.next = (i + 1) % len(t.parts)
				break
			}
		}
		c.vnow = t.vt
		t.vt += 1 / t.weight
		t.running++
		if t.ready == 0 {
			c.active.remove(t)
		} else {
			c.active.fix(t)
		}
		return s, tp.ps
	}
	return nil, nil
}

// endedLocked is told that a turn of t ended here: the limiter learns of it and t, if held, may
// try again.
func (c *Consumer) endedLocked(t *tenant) {
	t.running--
	if c.limiter != nil {
		c.limiter.Done(t.name)
	}
	if t.held {
		t.held = false
		c.activateLocked(t)
	}
}

// forgetPartLocked drops t's ready sessions of the partitions drop names.
func (t *tenant) forgetPartsLocked(drop map[partKey]bool) {
	kept := t.parts[:0]
	for _, tp := range t.parts {
		if drop[tp.ps.pk] {
			t.ready -= len(tp.ready)
			continue
		}
		kept = append(kept, tp)
	}
	clear(t.parts[len(kept):])
	t.parts = kept
	t.next = 0
}

// announceHeldLocked collects the head records of t's ready sessions not announced yet as
// waiting for their tenant's limit, and hands them to Config.Held outside the lock.
func (c *Consumer) announceHeldLocked(t *tenant) {
	if c.cfg.Held == nil {
		return
	}
	var recs []*kgo.Record
	for _, tp := range t.parts {
		for i := range tp.ready {
			s := tp.ready[i].s
			if s.running || len(s.queue) == 0 || s.queue[0].announced {
				continue
			}
			s.queue[0].announced = true
			recs = append(recs, s.queue[0].rec)
		}
	}
	if len(recs) == 0 {
		return
	}
	held := c.cfg.Held
	c.turns.Add(1)
	go func() {
		defer c.turns.Done()
		held(recs)
	}()
}

// Recheck lets every tenant the limiter refused try again: call it when the limits or the
// counts behind them changed (a quota raised, another worker's turns ended).
func (c *Consumer) Recheck() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tenants == nil || c.closing {
		return
	}
	for _, t := range c.tenants {
		if t.held {
			t.held = false
			c.activateLocked(t)
		}
	}
	c.scheduleLocked()
}

// SetMaxInflight changes the bound on concurrently running turns (an agents-file reload changed
// the agent's limits.in_flight). A raised bound starts waiting turns at once; under a lowered one
// the turns running finish and no new one starts until the count is below it. n must be positive.
func (c *Consumer) SetMaxInflight(n int) {
	if n <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.maxInflight = n
	if !c.closing {
		c.scheduleLocked()
	}
}

// HeldTenants lists the tenants the limiter holds back here.
func (c *Consumer) HeldTenants() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, t := range c.tenants {
		if t.held {
			out = append(out, t.name)
		}
	}
	return out
}

// tenantHeap is the active tenants, least virtual time first (activation order on a tie), each
// tenant knowing its index so it can be fixed or removed in place.
type tenantHeap []*tenant

func (h tenantHeap) less(i, j int) bool {
	if h[i].vt != h[j].vt {
		return h[i].vt < h[j].vt
	}
	return h[i].seq < h[j].seq
}

func (h tenantHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}

func (h *tenantHeap) push(t *tenant) {
	t.idx = len(*h)
	*h = append(*h, t)
	h.up(t.idx)
}

func (h *tenantHeap) remove(t *tenant) {
	i := t.idx
	if i < 0 {
		return
	}
	n := len(*h) - 1
	if i != n {
		h.swap(i, n)
	}
	(*h)[n] = nil
	*h = (*h)[:n]
	t.idx = -1
	if i != n {
		h.fixAt(i)
	}
}

func (h tenantHeap) fix(t *tenant) { h.fixAt(t.idx) }

func (h tenantHeap) fixAt(i int) {
	if !h.down(i) {
		h.up(i)
	}
}

func (h tenantHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h tenantHeap) down(i int) bool {
	start, n := i, len(h)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		j := l
		if r := l + 1; r < n && h.less(r, l) {
			j = r
		}
		if !h.less(j, i) {
			break
		}
		h.swap(i, j)
		i = j
	}
	return i > start
}
