package park

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Event is why a stream is woken; several may be pending at once. The lot raises KeepAlive (its
// wheel), Gone (its poller) and Signal (Config.Signal); the stream's owner defines its own from
// User on: User, User<<1, …
type Event uint32

const (
	// KeepAlive wakes a stream whose keep-alive is due.
	KeepAlive Event = 1 << iota
	// Gone wakes a stream whose taken-over connection's client went away (or sent something, which
	// a client of an event stream never does).
	Gone
	// Signal wakes a stream when Config.Signal fired and Config.Select chose the stream's tag.
	Signal
	// User is the first event of the stream's owner.
	User
)

// Config sets up a lot.
type Config struct {
	// KeepAlive is how often each stream is woken for its keep-alive. Required.
	KeepAlive time.Duration
	// Log reports a poller that could not start (a goroutine per connection then notices clients
	// leaving). Defaults to slog.Default().
	Log *slog.Logger
	// Signal, when set, returns a channel that is closed when something its streams depend on
	// changed (the gateway: a key was revoked); the lot's housekeeping goroutine waits on it beside
	// the wheel, takes the next channel, and wakes with Signal every live stream whose tag Select
	// chooses. A stream that is not live yet sees Signal in the first round Run gives it.
	Signal func() <-chan struct{}
	// Select chooses the tags Signal wakes; empty tags are never chosen. Required with Signal.
	Select func(tag string) bool
}

// Lot parks streams and runs the goroutines they share, while it holds any: a keep-alive wheel (up
// to 256 slots about 50 ms apart, each tick waking the streams of one slot, so every stream gets a
// keep-alive each KeepAlive and they are spread over it in small groups), which also passes on
// Config.Signal; and, for taken-over connections, a poller that notices clients leaving (on Linux
// one goroutine in epoll_wait on every socket; elsewhere, or where epoll fails, a goroutine per
// connection blocked in a 1-byte read). The first stream to enter starts them, the last to end
// stops them.
type Lot struct {
	cfg     Config
	running sync.WaitGroup // the lot's goroutines: its loops, taken-over streams' runs and wakes

	mu    sync.Mutex
	loops *loops // running while streams are in the lot
}

// New returns an empty lot: no goroutine runs until a stream enters.
func New(cfg Config) *Lot {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Lot{cfg: cfg}
}

// Wait blocks until every goroutine of the lot has ended, or ctx ends. They end once every stream
// has: wait for the streams first (their owners' tracking), then for the lot.
func (lot *Lot) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { lot.running.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for parked streams: %w", context.Cause(ctx))
	}
}

// Run states of a stream. At most one goroutine runs a stream at a time: a wake of an idle stream
// starts one, a wake of a running one marks it pending so the running goroutine goes round again
// instead of parking (no wake-up is lost between its last look and its parking).
const (
	stIdle int32 = iota
	stRunning
	stPending
	stDone
)

// Stream is one stream of a lot. A stream on a taken-over connection parks between wakes: no
// goroutine of its own, only this struct and its owner's state; a wake of a parked stream starts
// one short-lived goroutine that calls step and parks it again. A stream served inside its HTTP
// handler (HTTP/2, where a connection cannot be taken over) has the handler's goroutine wait for
// wakes instead. Either way, whatever needs the stream to act sets an event and calls Wake.
type Stream struct {
	lot   *Lot
	tag   string
	step  func(Event) (ended bool)
	onEnd func()
	flags atomic.Uint32
	state atomic.Int32
	kick  chan struct{} // streams served in their handler: Wake signals the handler's goroutine
	loops *loops
	slot  int // keep-alive wheel slot; guarded by loops.wheel.mu
	// Taken-over streams: the connection, its registration with the poller, and while the stream
	// opens, the cancel of the opening's context (the poller cancels it when the client leaves).
	nc      net.Conn
	pollTok uint64
	polled  bool
	cancel  atomic.Pointer[context.CancelFunc]
}

// Enter admits a stream to the lot, starting the lot's goroutines if it is the first. nc is the
// taken-over connection the stream writes to, nil for a stream served in its handler. step acts on
// the wakes in ev and reports whether the stream ended; onEnd is called once, after the stream
// ended and the lot let go of it (and closed nc). tag is what Config.Select chooses streams by.
// Until Run, wakes are recorded for Run's first round.
func (lot *Lot) Enter(tag string, nc net.Conn, step func(ev Event) (ended bool), onEnd func()) *Stream {
	s := &Stream{lot: lot, tag: tag, step: step, onEnd: onEnd, nc: nc}
	if nc == nil {
		s.kick = make(chan struct{}, 1)
	}
	s.state.Store(stRunning) // owned by the caller until Run parks it
	lot.mu.Lock()
	s.loops = lot.acquireLoops()
	lot.mu.Unlock()
	return s
}

// Run opens the stream and serves it until it ends. open does the stream's opening work (a
// subscription, a replay) with a context that ends when a taken-over connection's client leaves,
// and reports whether the stream is live; then the first round handles first and every wake
// recorded meanwhile. A taken-over stream runs on a goroutine of the lot's, and Run returns at once;
// it parks once live. A stream served in its handler runs on the caller's goroutine until it ends
// or ctx does.
func (s *Stream) Run(ctx context.Context, open func(ctx context.Context) (live bool), first Event) {
	if s.kick != nil {
		s.serveHere(ctx, open, first)
		return
	}
	s.lot.running.Add(1) // the stream holds the loops, so the count is not zero here
	go func() {
		defer s.lot.running.Done()
		s.openTakenOver(ctx, open, first)
	}()
}

func (s *Stream) openTakenOver(base context.Context, open func(context.Context) bool, first Event) {
	ctx, cancel := context.WithCancel(base)
	s.cancel.Store(&cancel)
	if tok, err := s.loops.poll.add(s.nc, func() { s.Wake(Gone) }); err == nil {
		s.pollTok, s.polled = tok, true
	} else {
		s.lot.cfg.Log.Warn("watch stream connection", "err", err)
	}
	ok := open(ctx)
	s.cancel.Store(nil)
	cancel()
	if !ok {
		s.state.Store(stDone)
		s.finish()
		return
	}
	s.loops.wheel.add(s)
	s.flags.Or(uint32(first))
	s.loop()
}

func (s *Stream) serveHere(ctx context.Context, open func(context.Context) bool, first Event) {
	defer func() {
		s.state.Store(stDone)
		s.release()
	}()
	if !open(ctx) {
		return
	}
	s.loops.wheel.add(s)
	s.flags.Or(uint32(first))
	for {
		if s.step(Event(s.flags.Swap(0))) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		}
	}
}

// Wake records why the stream must act and makes sure it will: it never blocks.
func (s *Stream) Wake(ev Event) {
	s.flags.Or(uint32(ev))
	if ev&Gone != 0 {
		if c := s.cancel.Load(); c != nil {
			(*c)()
		}
	}
	if s.kick != nil {
		select {
		case s.kick <- struct{}{}:
		default:
		}
		return
	}
	for {
		switch s.state.Load() {
		case stIdle:
			if s.state.CompareAndSwap(stIdle, stRunning) {
				// A parked stream holds the lot's loops, so the count is not zero here.
				s.lot.running.Add(1)
				go func() {
					defer s.lot.running.Done()
					s.loop()
				}()
				return
			}
		case stRunning:
			if s.state.CompareAndSwap(stRunning, stPending) {
				return
			}
		default: // pending or done: nothing to start
			return
		}
	}
}

// loop runs a taken-over stream until nothing is left to do, then parks it; a stream that ends is
// released here.
func (s *Stream) loop() {
	for {
		if s.step(Event(s.flags.Swap(0))) {
			s.state.Store(stDone)
			s.finish()
			return
		}
		if s.state.CompareAndSwap(stRunning, stIdle) {
			return
		}
		// Woken while running: the events set meanwhile are read on the next round.
		s.state.Store(stRunning)
	}
}

// finish lets go of a taken-over stream that ended: its registration with the poller (removed
// before its connection closes), its connection, and its place in the lot.
func (s *Stream) finish() {
	if s.polled {
		s.loops.poll.remove(s.nc, s.pollTok)
	}
	_ = s.nc.Close()
	s.release()
}

// release takes an ended stream out of the wheel and the lot, whose last stream stops the loops,
// and tells its owner.
func (s *Stream) release() {
	s.loops.wheel.remove(s)
	s.lot.mu.Lock()
	s.lot.releaseLoops(s.loops)
	s.lot.mu.Unlock()
	if s.onEnd != nil {
		s.onEnd()
	}
}

// loops are the lot's goroutines for its streams: the keep-alive wheel (which also passes on
// Config.Signal) and the poller. They run while the lot has streams: the first starts them, the
// last stops them, and lot.running counts them.
type loops struct {
	users int // streams using them; guarded by Lot.mu
	stop  chan struct{}
	// signal is Config.Signal's channel, taken when the loops start, inside the first stream's
	// Enter: a signal fired after Enter returned is never missed, however late housekeep runs.
	signal <-chan struct{}
	wheel  wheel
	poll   poller
}

// acquireLoops registers a newly entered stream with the lot's loops, starting them if none run.
// Called with lot.mu held.
func (lot *Lot) acquireLoops() *loops {
	if l := lot.loops; l != nil {
		l.users++
		return l
	}
	l := &loops{users: 1, stop: make(chan struct{})}
	if lot.cfg.Signal != nil {
		l.signal = lot.cfg.Signal()
	}
	l.wheel.init(lot.cfg.KeepAlive)
	p, err := newPoller()
	if err != nil {
		lot.cfg.Log.Warn("epoll unavailable; a reader goroutine per stream notices clients leaving", "err", err)
		p = newReaderPoller()
	}
	l.poll = p
	lot.loops = l
	lot.running.Add(2)
	go func() {
		defer lot.running.Done()
		l.poll.run()
	}()
	go func() {
		defer lot.running.Done()
		lot.housekeep(l)
	}()
	return l
}

// releaseLoops drops an ended stream's hold on l; the last one stops it. Called with lot.mu held.
func (lot *Lot) releaseLoops(l *loops) {
	if l.users--; l.users == 0 {
		if lot.loops == l {
			lot.loops = nil
		}
		close(l.stop)
		l.poll.stop()
	}
}

// housekeep is the keep-alive wheel's loop: each tick it wakes the streams of the next slot for
// their keep-alive, so every stream gets one each KeepAlive and they are spread over the interval;
// and when Config.Signal fires, it wakes the streams whose tags Config.Select chooses.
func (lot *Lot) housekeep(l *loops) {
	t := time.NewTicker(l.wheel.tick)
	defer t.Stop()
	signal := l.signal
	var due []*Stream
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			due = l.wheel.advance(due[:0])
			for _, s := range due {
				s.Wake(KeepAlive)
			}
		case <-signal:
			// Taken before the scan, so a signal during it is not missed.
			signal = lot.cfg.Signal()
			due = l.wheel.chosen(due[:0], lot.cfg.Select)
			for _, s := range due {
				s.Wake(Signal)
			}
		}
		clear(due) // keep no stream reachable from here once woken
		due = due[:0]
	}
}
