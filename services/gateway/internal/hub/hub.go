package hub

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/turnstile-run/turnstile/pkg/lifecycle"
	"github.com/turnstile-run/turnstile/pkg/streams"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

// Delivery is one entry with the epoch of the stream generation it belongs to.
type Delivery struct {
	Epoch string
	streams.Entry
}

// Config tunes a Hub.
type Config struct {
	// Buffer is how many entries a subscriber may fall behind the live tail before it is cut loose
	// (the size of each session's shared ring). Defaults to 256.
	Buffer int
	// Resync is the longest a feed goes without reading its stream: a last-resort re-read for a
	// notification lost some other way than a Pub/Sub reconnect (a reconnect already makes every
	// feed re-read at once). Idle feeds cost Redis one read per Resync each, so it is long.
	// Defaults to 30s.
	Resync time.Duration
	// Readers is how many reads of woken feeds the hub has in flight at once, and ReadBatch how
	// many feeds one read covers (one round trip for all of them). A session's feed is read by one
	// reader at a time. Default 4 and 256.
	Readers   int
	ReadBatch int
}

// Defaults of Config.
const (
	ResyncDefault    = 30 * time.Second
	ReadersDefault   = 4
	ReadBatchDefault = 256
)

// resyncTick is how often the hub looks for feeds due for a re-read.
const resyncTick = time.Second

// Hub owns the shared Pub/Sub connection and the session feeds.
type Hub struct {
	cfg    Config
	rdb    redis.UniversalClient
	reader *streams.Reader
	log    *slog.Logger

	mu     sync.Mutex
	feeds  map[wire.SessionKey]*feed // by session
	byChan map[string]*feed          // by notify channel
	ps     *redis.PubSub

	// ctx is the running hub's context (nil before the first Start), cancel ends it; both are
	// written under mu. wg counts the hub's goroutines of the current run, and done is closed once
	// they have all ended after Stop.
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	wg     sync.WaitGroup

	// life serialises Start and Stop.
	life sync.Mutex

	woken woken

	// confirmed counts the subscription confirmations dispatched since the hub was made: each wakes
	// its feed once, so a caller that needs the hub quiet (a test) waits for one per feed.
	confirmed atomic.Int64
}

// woken is the queue of feeds waiting to be read, each at most once; wake has a value while the
// queue may hold feeds no reader has taken.
type woken struct {
	mu    sync.Mutex
	feeds []*feed
	wake  chan struct{}
}

// New returns a hub.
func New(cfg Config, rdb redis.UniversalClient, reader *streams.Reader, log *slog.Logger) *Hub {
	if cfg.Buffer == 0 {
		cfg.Buffer = 256
	}
	if cfg.Resync <= 0 {
		cfg.Resync = ResyncDefault
	}
	if cfg.Readers <= 0 {
		cfg.Readers = ReadersDefault
	}
	if cfg.ReadBatch <= 0 {
		cfg.ReadBatch = ReadBatchDefault
	}
	return &Hub{cfg: cfg, rdb: rdb, reader: reader, log: log, feeds: map[wire.SessionKey]*feed{}, byChan: map[string]*feed{}, woken: woken{wake: make(chan struct{}, 1)}}
}

// Start opens the Pub/Sub connection and its dispatcher. While running, Start does nothing; after
// a Stop whose goroutines have all ended it starts afresh, and while they are still ending (Stop
// gave up at its deadline) it fails.
func (h *Hub) Start(ctx context.Context) error {
	h.life.Lock()
	defer h.life.Unlock()
	h.mu.Lock()
	running, done := h.ctx != nil && h.ctx.Err() == nil, h.done
	h.mu.Unlock()
	if running {
		return nil
	}
	if done != nil {
		select {
		case <-done:
		default:
			return errors.New("start hub: the last run is still stopping")
		}
	}
	// The hub outlives Start's context (it serves every stream until Stop), so its connection is
	// bound to a context of its own that Stop cancels.
	hctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	ps := h.rdb.Subscribe(hctx)
	// With subscriptions: after the connection dropped, go-redis subscribes every channel again on
	// a new one, and each confirmation is the signal that its feed may have missed notifications.
	ch := ps.ChannelWithSubscriptions(redis.WithChannelSize(1024))
	done = make(chan struct{})
	h.mu.Lock()
	h.ctx, h.cancel, h.ps, h.done = hctx, cancel, ps, done
	// Feeds of an earlier run ended with it; their subscribers' streams end too.
	h.feeds, h.byChan = map[wire.SessionKey]*feed{}, map[string]*feed{}
	h.mu.Unlock()
	h.woken.mu.Lock()
	h.woken.feeds = nil
	h.woken.mu.Unlock()
	h.wg.Add(2 + h.cfg.Readers)
	for range h.cfg.Readers {
		go func() {
			defer h.wg.Done()
			h.readLoop(hctx)
		}()
	}
	go func() {
		defer h.wg.Done()
		for msg := range ch {
			h.dispatch(msg)
		}
	}()
	go func() {
		defer h.wg.Done()
		h.resyncLoop(hctx)
	}()
	// Feeds join wg only while hctx is live, under mu, and Stop cancels hctx under mu: once it is
	// cancelled, wg only goes down.
	go func() {
		<-hctx.Done()
		h.wg.Wait()
		close(done)
	}()
	return nil
}

// dispatch wakes the feed a Pub/Sub message is for. A notification says the stream grew; a
// subscription confirmation says the feed is (again) subscribed, so whatever was appended while it
// was not — the connection dropped and go-redis reconnected — must be read now. The first
// confirmation of a feed's own SUBSCRIBE costs it one read more, which is harmless.
func (h *Hub) dispatch(msg any) {
	var channel string
	switch m := msg.(type) {
	case *redis.Message:
		channel = m.Channel
	case *redis.Subscription:
		if m.Kind != "subscribe" && m.Kind != "ssubscribe" {
			return
		}
		channel = m.Channel
		h.confirmed.Add(1)
	default:
		return
	}
	h.mu.Lock()
	f := h.byChan[channel]
	h.mu.Unlock()
	if f != nil {
		f.notify()
	}
}

// resyncLoop wakes every feed that has not read its stream for cfg.Resync. One loop for the whole
// hub, not a ticker per feed: a replica may hold thousands of idle sessions, and polling each every
// second cost Redis a transaction per idle session per second.
func (h *Hub) resyncLoop(ctx context.Context) {
	var due []*feed
	lifecycle.Every(ctx, min(resyncTick, h.cfg.Resync), func(context.Context) {
		limit := time.Now().Add(-h.cfg.Resync).UnixNano()
		h.mu.Lock()
		for _, f := range h.feeds {
			if f.lastRead.Load() <= limit {
				due = append(due, f)
			}
		}
		h.mu.Unlock()
		for _, f := range due {
			f.notify()
		}
		clear(due)
		due = due[:0]
	})
}

// Stop closes every feed and the Pub/Sub connection, and waits for the hub's goroutines to end or
// for ctx to end (then it says so; a later Stop waits again). Safe twice or before Start.
func (h *Hub) Stop(ctx context.Context) error {
	h.life.Lock()
	h.mu.Lock()
	cancel, ps, done := h.cancel, h.ps, h.done
	h.ps = nil
	if cancel != nil {
		cancel()
	}
	h.mu.Unlock()
	h.life.Unlock()
	if done == nil {
		return nil
	}
	if ps != nil {
		_ = ps.Close()
	}
	return lifecycle.Wait(ctx, done, "hub")
}

// Subscribers counts the subscribers of every feed.
func (h *Hub) Subscribers() int {
	h.mu.Lock()
	feeds := make([]*feed, 0, len(h.feeds))
	for _, f := range h.feeds {
		feeds = append(feeds, f)
	}
	h.mu.Unlock()
	n := 0
	for _, f := range feeds {
		f.mu.Lock()
		n += len(f.subs)
		f.mu.Unlock()
	}
	return n
}

// Sessions counts sessions with local subscribers.
func (h *Hub) Sessions() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.feeds)
}

// Subscriber follows a session's new entries. The feed keeps one ring of recent deliveries per
// session, shared by all its subscribers; each subscriber only holds its position in it and a
// wake-up channel or function, so an idle subscriber costs a few hundred bytes whatever the
// buffer size.
type Subscriber struct {
	// Ready receives a value when entries may be waiting; call Next. Nil for a subscriber made by
	// SubscribeFunc, whose function is called instead.
	Ready <-chan struct{}

	ready chan struct{}
	wake  func()
	feed  *feed
	next  uint64 // sequence of the next delivery to read; guarded by feed.mu
}

// signal tells the subscriber that entries may be waiting; it never blocks.
func (s *Subscriber) signal() {
	if s.wake != nil {
		s.wake()
		return
	}
	select {
	case s.ready <- struct{}{}:
	default: // already signalled
	}
}

// Next appends the deliveries since the last call to buf and returns it. lost is true when the
// subscriber fell more than the buffer behind the live tail: the entries it missed are gone from
// the ring and it must end its stream (the client resumes from its cursor).
func (s *Subscriber) Next(buf []*Delivery) (out []*Delivery, lost bool) {
	f := s.feed
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.head-s.next > uint64(len(f.ring)) {
		return buf, true
	}
	for ; s.next < f.head; s.next++ {
		buf = append(buf, f.ring[s.next%uint64(len(f.ring))])
	}
	return buf, false
}

// Subscribe registers a subscriber for a session's entries appended from now on (entries may also
// include some older ones; callers skip what they have sent). The first subscriber of a session on
// this replica starts its feed; the Redis round trips that takes happen outside the hub's lock, so
// sessions start in parallel.
func (h *Hub) Subscribe(ctx context.Context, session wire.SessionKey) (*Subscriber, error) {
	return h.subscribe(ctx, session, nil)
}

// SubscribeFunc is Subscribe for a caller that keeps no goroutine waiting on Ready: wake is called
// instead whenever entries may be waiting, possibly before SubscribeFunc returns. It is called from
// the hub's readers with the feed's lock held, so it must return at once (start work elsewhere,
// never block) and must not call back into the hub; the feed never waits on a subscriber.
func (h *Hub) SubscribeFunc(ctx context.Context, session wire.SessionKey, wake func()) (*Subscriber, error) {
	if wake == nil {
		return nil, errors.New("subscribe: nil wake function")
	}
	return h.subscribe(ctx, session, wake)
}

func (h *Hub) subscribe(ctx context.Context, session wire.SessionKey, wake func()) (*Subscriber, error) {
	h.mu.Lock()
	if h.ctx == nil || h.ctx.Err() != nil {
		h.mu.Unlock()
		return nil, errors.New("hub is stopped")
	}
	f := h.feeds[session]
	created := f == nil
	if created {
		k := h.reader.Keys(session)
		// The feed counts as being read until init has run: a notification meanwhile is kept and
		// read once init knows where the stream ends.
		f = &feed{
			hub: h, session: session, channel: k.Notify, ready: make(chan struct{}),
			ring: make([]*Delivery, h.cfg.Buffer), reading: true,
			subs: map[*Subscriber]struct{}{}, stop: make(chan struct{}),
		}
		f.lastRead.Store(time.Now().UnixNano()) // init reads where the stream ends
		h.feeds[session] = f
		h.byChan[k.Notify] = f
	}
	f.refs++
	ps := h.ps
	h.mu.Unlock()

	if created {
		f.err = f.init(ctx, ps)
		close(f.ready)
		h.readDone(f, false)
	}
	select {
	case <-f.ready:
	case <-ctx.Done():
		h.release(f)
		return nil, context.Cause(ctx)
	}
	if f.err != nil {
		h.release(f)
		return nil, f.err
	}
	s := &Subscriber{feed: f, wake: wake}
	if wake == nil {
		s.ready = make(chan struct{}, 1)
		s.Ready = s.ready
	}
	f.mu.Lock()
	s.next = f.head
	f.subs[s] = struct{}{}
	f.mu.Unlock()
	return s, nil
}

// Unsubscribe removes a subscriber; the feed ends with its last subscriber.
func (h *Hub) Unsubscribe(s *Subscriber) {
	f := s.feed
	f.mu.Lock()
	delete(f.subs, s)
	f.mu.Unlock()
	h.release(f)
}

// release drops one reference to a feed and ends it with the last. The UNSUBSCRIBE is written
// under the hub's lock, so a feed started again for the same session subscribes after it.
func (h *Hub) release(f *feed) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f.refs--
	if f.refs > 0 || h.feeds[f.session] != f {
		return
	}
	delete(h.feeds, f.session)
	delete(h.byChan, f.channel)
	close(f.stop)
	if h.ps != nil && f.err == nil {
		_ = h.ps.Unsubscribe(h.ctx, f.channel)
	}
}

type feed struct {
	hub     *Hub
	session wire.SessionKey
	channel string
	stop    chan struct{} // closed when the feed's last subscriber left
	ready   chan struct{} // closed once init ran; err says how
	err     error
	refs    int // guarded by hub.mu
	// lastRead is when the feed's last read began (Unix nanoseconds); the hub's resync loop wakes a
	// feed whose last read is older than Config.Resync.
	lastRead atomic.Int64
	// queued says the feed is in the hub's woken queue, reading that a reader has taken it (or
	// init runs), again that it was woken meanwhile and goes back in the queue when that ends.
	// Guarded by hub.woken.mu.
	queued, reading, again bool

	mu    sync.Mutex
	subs  map[*Subscriber]struct{}
	epoch string
	last  streams.EntryID
	ring  []*Delivery // the newest deliveries; sequence n lives at ring[n%len(ring)]
	head  uint64      // sequence of the next delivery
}

// init subscribes to the session's notifications, then reads where the stream ends: everything
// appended after that read is either announced or found by the periodic re-read.
func (f *feed) init(ctx context.Context, ps *redis.PubSub) error {
	if ps == nil {
		return errors.New("hub is stopped")
	}
	if err := ps.Subscribe(ctx, f.channel); err != nil {
		return fmt.Errorf("subscribe to session notifications: %w", err)
	}
	st, err := f.hub.reader.State(ctx, f.session)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.epoch, f.last = st.Epoch, st.LastID
	f.mu.Unlock()
	return nil
}

// notify wakes the feed: it is read by the next free reader, once however often it was woken
// before that read began.
func (f *feed) notify() { f.hub.wakeFeed(f) }

func (h *Hub) wakeFeed(f *feed) {
	h.woken.mu.Lock()
	switch {
	case f.reading:
		f.again = true
	case !f.queued:
		f.queued = true
		h.woken.feeds = append(h.woken.feeds, f)
	}
	h.woken.mu.Unlock()
	select {
	case h.woken.wake <- struct{}{}:
	default:
	}
}

// readDone ends a read of f (or its init); a feed woken meanwhile goes back in the queue, and so
// does one whose read was cut short (more entries waiting, a new stream generation) when more is
// true.
func (h *Hub) readDone(f *feed, more bool) {
	h.woken.mu.Lock()
	f.reading = false
	requeue := f.again || more
	f.again = false
	h.woken.mu.Unlock()
	if requeue {
		h.wakeFeed(f)
	}
}

// take removes up to ReadBatch feeds from the queue and marks them as being read. A feed whose
// last subscriber left, or whose subscription failed, leaves the queue unread.
func (h *Hub) take(batch []*feed) []*feed {
	h.woken.mu.Lock()
	defer h.woken.mu.Unlock()
	n := min(len(h.woken.feeds), h.cfg.ReadBatch)
	batch = batch[:0]
	for _, f := range h.woken.feeds[:n] {
		f.queued = false
		if f.err != nil || isClosed(f.stop) {
			continue
		}
		f.reading = true
		batch = append(batch, f)
	}
	rest := copy(h.woken.feeds, h.woken.feeds[n:])
	clear(h.woken.feeds[rest:])
	h.woken.feeds = h.woken.feeds[:rest]
	if rest > 0 { // another reader may take the rest meanwhile
		select {
		case h.woken.wake <- struct{}{}:
		default:
		}
	}
	return batch
}

// readLoop is one of the hub's readers: it reads woken feeds a batch at a time, one round trip for
// the batch, until the hub stops.
func (h *Hub) readLoop(ctx context.Context) {
	var batch []*feed
	reqs := make([]streams.ReadRequest, 0, h.cfg.ReadBatch)
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.woken.wake:
		}
		for ctx.Err() == nil {
			if batch = h.take(batch); len(batch) == 0 && !h.queued() {
				break
			}
			if len(batch) > 0 {
				reqs = h.read(ctx, batch, reqs[:0])
			}
		}
	}
}

// queued says whether feeds wait in the queue.
func (h *Hub) queued() bool {
	h.woken.mu.Lock()
	defer h.woken.mu.Unlock()
	return len(h.woken.feeds) > 0
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// feedReadCount is the most entries one read takes of a session's stream; a feed that got as many
// is read again at once.
const feedReadCount = 512

// read reads the batch's feeds in one round trip and hands each its new entries.
func (h *Hub) read(ctx context.Context, batch []*feed, reqs []streams.ReadRequest) []streams.ReadRequest {
	now := time.Now().UnixNano()
	for _, f := range batch {
		f.lastRead.Store(now)
		f.mu.Lock()
		reqs = append(reqs, streams.ReadRequest{Session: f.session, After: f.last, Count: feedReadCount})
		f.mu.Unlock()
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	res := h.reader.ReadMany(rctx, reqs)
	cancel()
	failed := 0
	var firstErr error
	for i, f := range batch {
		more, err := f.apply(res[i])
		if err != nil {
			failed++
			firstErr = cmp.Or(firstErr, err)
		}
		h.readDone(f, more)
	}
	if failed > 0 && ctx.Err() == nil {
		h.log.Warn("read session streams failed", "sessions", failed, "of", len(batch), "err", firstErr)
	}
	return reqs
}

// apply hands the feed what its read found, and says whether the feed must
// be read again at once: the read returned as many entries as it asked for, or found a new
// stream generation, whose IDs start again, so it is read from its beginning. Subscribers holding
// the old epoch see the change in the next delivery and end their streams, so their clients resume
// and get a stream.reset.
func (f *feed) apply(r streams.ReadResult) (more bool, err error) {
	if r.Err != nil {
		return false, r.Err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.Epoch != f.epoch {
		f.epoch, f.last = r.Epoch, streams.EntryID{}
		return r.Epoch != "", nil
	}
	for _, e := range r.Entries {
		f.ring[f.head%uint64(len(f.ring))] = &Delivery{Epoch: r.Epoch, Entry: e}
		f.head++
	}
	if len(r.Entries) > 0 {
		f.last = r.Entries[len(r.Entries)-1].ID
		for s := range f.subs {
			s.signal()
		}
	}
	return len(r.Entries) == feedReadCount, nil
}
