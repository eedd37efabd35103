package sse

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/services/gateway/internal/hub"
)

// What a live stream is woken for; several may be pending at once.
const (
	evFeed      uint32 = 1 << iota // the hub has entries for it
	evKeepAlive                    // its keep-alive is due
	evClose                        // drained or cut (conn.closeWithRetry is closed)
	evRevoke                       // its API key's revocation may have changed
	evGone                         // its client went away (or sent something)
)

// Run states of a parked stream. At most one goroutine runs a stream at a time: a wake of an idle
// stream starts one, a wake of a running one marks it pending so the running goroutine goes round
// again instead of parking (no wake-up is lost between its last look and its parking).
const (
	stIdle int32 = iota
	stRunning
	stPending
	stDone
)

// live is an admitted stream from the moment it subscribes. A taken-over (HTTP/1.x) stream parks
// between wakes: no goroutine of its own, only this struct; a stream served inside its handler
// (HTTP/2) has the handler's goroutine wait on kick instead. Either way, everything that may need
// it to act — the hub, the keep-alive wheel, Drain and Cut, the revocation watcher, the poller
// noticing its client leave — sets a flag and calls wake.
type live struct {
	stream
	c       *conn
	session string
	sub     *hub.Subscriber
	batch   []*hub.Delivery
	flags   atomic.Uint32
	state   atomic.Int32
	kick    chan struct{} // in-handler streams: wake signals the handler's goroutine
	loops   *idleLoops
	slot    int // keep-alive wheel slot; guarded by loops.wheel.mu
	// Taken-over streams: the connection, its registration with the poller, and while the stream
	// replays, the cancel of the replay's context (the poller cancels it when the client leaves).
	nc      net.Conn
	pollTok uint64
	polled  bool
	cancel  atomic.Pointer[context.CancelFunc]
}

// wake records why the stream must act and makes sure it will: it never blocks.
func (l *live) wake(ev uint32) {
	l.flags.Or(ev)
	if ev&evGone != 0 {
		if c := l.cancel.Load(); c != nil {
			(*c)()
		}
	}
	if l.kick != nil {
		select {
		case l.kick <- struct{}{}:
		default:
		}
		return
	}
	for {
		switch l.state.Load() {
		case stIdle:
			if l.state.CompareAndSwap(stIdle, stRunning) {
				// A parked stream still holds its slot in h.streams, so adding here cannot race
				// with Wait seeing zero.
				l.h.streams.Add(1)
				go func() {
					defer l.h.streams.Done()
					l.loop()
				}()
				return
			}
		case stRunning:
			if l.state.CompareAndSwap(stRunning, stPending) {
				return
			}
		default: // pending or done: nothing to start
			return
		}
	}
}

// loop runs a taken-over stream until nothing is left to do, then parks it; a stream that ends is
// released here.
func (l *live) loop() {
	for {
		if l.step(l.flags.Swap(0)) {
			l.state.Store(stDone)
			l.finish()
			return
		}
		if l.state.CompareAndSwap(stRunning, stIdle) {
			return
		}
		// Woken while running: the flags set meanwhile are read on the next round.
		l.state.Store(stRunning)
	}
}

// step acts on the wakes in ev; it reports whether the stream ended.
func (l *live) step(ev uint32) (ended bool) {
	h := l.h
	if ev&evGone != 0 {
		return true
	}
	select {
	case <-l.c.closeWithRetry:
		l.end("server closing this stream; reconnect", "drain")
		return true
	default:
	}
	if ev&evRevoke != 0 && l.c.apiKey != "" && h.cfg.Revocations.Revoked(l.c.apiKey) {
		l.revoke()
		return true
	}
	if ev&evFeed != 0 {
		var lost bool
		l.batch, lost = l.sub.Next(l.batch[:0])
		if lost {
			l.end("client too slow; reconnect to resume", "slow_client")
			return true
		}
		if len(l.batch) > 0 {
			done, changed := false, false
			for _, d := range l.batch {
				if done, changed = l.deliver(d); done || changed {
					break
				}
			}
			clear(l.batch)
			if cap(l.batch) > keptBatchCap || len(l.batch) == 0 {
				l.batch = nil // an idle stream keeps no slice
			} else {
				l.batch = l.batch[:0]
			}
			if changed {
				// The stream was lost and restarted under us: end so the client's resume gets a reset.
				l.end("stream generation changed; reconnect", "epoch_changed")
				return true
			}
			if l.flush() != nil || done {
				return true
			}
		}
	}
	if ev&evKeepAlive != 0 {
		l.arm()
		l.ew.comment("keep-alive")
		if l.flush() != nil {
			return true
		}
	}
	return false
}

// finish releases a taken-over stream that ended: its subscription, its registrations, its slot
// and its connection.
func (l *live) finish() {
	if l.sub != nil {
		l.h.hub.Unsubscribe(l.sub)
	}
	if l.polled {
		l.loops.poll.remove(l.nc, l.pollTok)
	}
	_ = l.nc.Close()
	l.h.release(l)
	l.h.streams.Done()
}

// idleLoops are the handler's goroutines for its live streams: the keep-alive wheel (which also
// passes on revocations) and the poller that notices taken-over streams' clients leaving. They run
// while the handler has live streams: the first starts them, the last stops them, and h.streams
// counts them, so Wait waits for them too.
type idleLoops struct {
	users int // live streams using them; guarded by Handler.mu
	stop  chan struct{}
	wheel wheel
	poll  poller
}

// acquire registers a newly admitted stream with the handler's loops, starting them if none run.
// Called with h.mu held, after the stream was counted in h.streams.
func (h *Handler) acquireLoops() *idleLoops {
	if l := h.loops; l != nil {
		l.users++
		return l
	}
	l := &idleLoops{users: 1, stop: make(chan struct{})}
	l.wheel.init(h.cfg.KeepAlive)
	p, err := newPoller()
	if err != nil {
		h.log.Warn("epoll unavailable; a reader goroutine per stream notices clients leaving", "err", err)
		p = newReaderPoller()
	}
	l.poll = p
	h.loops = l
	h.streams.Add(2)
	go func() {
		defer h.streams.Done()
		l.poll.run()
	}()
	go func() {
		defer h.streams.Done()
		h.housekeep(l)
	}()
	return l
}

// release removes an ended stream from the handler's books and loops; the last stream's release
// stops the loops.
func (h *Handler) release(l *live) {
	l.loops.wheel.remove(l)
	h.mu.Lock()
	delete(h.conns, l.c)
	if h.perSession[l.session]--; h.perSession[l.session] <= 0 {
		delete(h.perSession, l.session)
	}
	if l.c.tenant != "" {
		if h.perTenant[l.c.tenant]--; h.perTenant[l.c.tenant] <= 0 {
			delete(h.perTenant, l.c.tenant)
		}
	}
	lp := l.loops
	if lp.users--; lp.users == 0 {
		if h.loops == lp {
			h.loops = nil
		}
		close(lp.stop)
		lp.poll.stop()
	}
	h.mu.Unlock()
	h.connections.Dec()
}

// housekeep is the keep-alive wheel's loop: each tick it wakes the streams of the next slot for
// their keep-alive, so every stream gets one each KeepAlive and they are spread over the interval;
// and when the revocation watcher learns of a newly revoked key, it wakes that key's streams.
func (h *Handler) housekeep(l *idleLoops) {
	t := time.NewTicker(l.wheel.tick)
	defer t.Stop()
	revoked := h.cfg.Revocations.Changed()
	var due []*live
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			due = l.wheel.advance(due[:0])
			for _, s := range due {
				s.wake(evKeepAlive)
			}
		case <-revoked:
			// Taken before the scan, so a revocation during it is not missed.
			revoked = h.cfg.Revocations.Changed()
			h.mu.Lock()
			for c := range h.conns {
				if c.live != nil && c.apiKey != "" && h.cfg.Revocations.Revoked(c.apiKey) {
					due = append(due, c.live)
				}
			}
			h.mu.Unlock()
			for _, s := range due {
				s.wake(evRevoke)
			}
		}
		clear(due) // keep no stream reachable from here once woken
		due = due[:0]
	}
}

// The keep-alive wheel ticks about every wheelTick, with at most wheelMaxSlots slots: at the
// default 15 s keep-alive, 256 slots 59 ms apart, so 20,000 streams' keep-alives come 78 at a
// time rather than in a few large bursts that would hold up live deliveries behind them.
const (
	wheelTick     = 50 * time.Millisecond
	wheelMaxSlots = 256
)

// wheel spreads keep-alives: a stream joins the slot the hand has just left, so its first
// keep-alive comes one interval after it opened, and every interval after that.
type wheel struct {
	tick  time.Duration
	mu    sync.Mutex
	hand  int
	slots []map[*live]struct{}
}

func (w *wheel) init(keepAlive time.Duration) {
	n := min(max(int(keepAlive/wheelTick), 1), wheelMaxSlots)
	w.tick = max(keepAlive/time.Duration(n), time.Millisecond)
	w.slots = make([]map[*live]struct{}, n)
	for i := range w.slots {
		w.slots[i] = map[*live]struct{}{}
	}
}

func (w *wheel) add(l *live) {
	w.mu.Lock()
	l.slot = w.hand
	w.slots[l.slot][l] = struct{}{}
	w.mu.Unlock()
}

func (w *wheel) remove(l *live) {
	w.mu.Lock()
	delete(w.slots[l.slot], l)
	w.mu.Unlock()
}

// advance moves the hand one slot and appends that slot's streams to due.
func (w *wheel) advance(due []*live) []*live {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.hand = (w.hand + 1) % len(w.slots)
	for l := range w.slots[w.hand] {
		due = append(due, l)
	}
	return due
}

// poller notices taken-over connections whose clients went away: anything readable or a hang-up
// calls the registration's gone function, once.
type poller interface {
	// add registers nc; gone is called at most once, from the poller's goroutine. The token
	// identifies this registration for remove.
	add(nc net.Conn, gone func()) (token uint64, err error)
	// remove deregisters nc; call it before closing nc.
	remove(nc net.Conn, token uint64)
	run()
	stop()
}

// readerPoller is the portable poller: a goroutine per connection blocked in a 1-byte read. The
// client sends nothing more on an event stream, so a read returning means it is gone.
type readerPoller struct {
	readers sync.WaitGroup
	done    chan struct{}
	once    sync.Once
}

func newReaderPoller() *readerPoller { return &readerPoller{done: make(chan struct{})} }

func (p *readerPoller) add(nc net.Conn, gone func()) (uint64, error) {
	p.readers.Add(1)
	go func() {
		defer p.readers.Done()
		var b [1]byte
		_, _ = nc.Read(b[:])
		gone()
	}()
	return 0, nil
}

func (p *readerPoller) remove(net.Conn, uint64) {}

// run returns once stopped and every reader ended (their connections are closed by then).
func (p *readerPoller) run() {
	<-p.done
	p.readers.Wait()
}

func (p *readerPoller) stop() { p.once.Do(func() { close(p.done) }) }

// serveTakenOver runs a taken-over stream: it subscribes and replays on this goroutine, then
// parks it. The stream's slot in h.streams is released when it ends.
func (h *Handler) serveTakenOver(base context.Context, l *live, o openRequest, info OpenInfo) {
	ctx, cancel := context.WithCancel(base)
	l.cancel.Store(&cancel)
	gone := func() { l.wake(evGone) }
	if tok, err := l.loops.poll.add(l.nc, gone); err == nil {
		l.pollTok, l.polled = tok, true
	} else {
		h.log.Warn("watch stream connection", "err", err)
	}
	ok := h.open(ctx, l, o, info)
	l.cancel.Store(nil)
	cancel()
	if ok {
		l.loops.wheel.add(l)
		// The first round looks at everything: entries that arrived during replay, a drain or
		// revocation that came before the stream was live.
		l.flags.Or(evFeed | evClose | evRevoke)
		l.loop()
		return
	}
	l.state.Store(stDone)
	l.finish()
}

// serveInHandler runs a stream that cannot be taken over (HTTP/2) on the handler's goroutine.
func (h *Handler) serveInHandler(ctx context.Context, l *live, o openRequest, info OpenInfo) {
	defer func() {
		l.state.Store(stDone)
		if l.sub != nil {
			h.hub.Unsubscribe(l.sub)
		}
		h.release(l)
		h.streams.Done()
	}()
	if !h.open(ctx, l, o, info) {
		return
	}
	l.loops.wheel.add(l)
	l.flags.Or(evFeed | evClose | evRevoke)
	for {
		if l.step(l.flags.Swap(0)) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-l.kick:
		}
	}
}

// retryHint is the jittered reconnect delay a stream starts with.
func (h *Handler) retryHint() int64 { return httpx.Jitter(h.cfg.Retry).Milliseconds() }
