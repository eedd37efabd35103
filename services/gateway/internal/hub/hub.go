package hub

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/turnstile-run/turnstile/pkg/streams"
)

// Delivery is one entry with the epoch of the stream generation it belongs to.
type Delivery struct {
	Epoch string
	streams.Entry
}

// Config tunes a Hub.
type Config struct {
	// Buffer is each subscriber's buffer in entries. Defaults to 256.
	Buffer int
	// Poll is the safety re-read interval of each feed. Defaults to 2s.
	Poll time.Duration
}

// Hub owns the shared Pub/Sub connection and the session feeds.
type Hub struct {
	cfg    Config
	rdb    redis.UniversalClient
	reader *streams.Reader
	log    *slog.Logger

	mu     sync.Mutex
	feeds  map[string]*feed // by session
	byChan map[string]*feed // by notify channel
	ps     *redis.PubSub

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns a hub.
func New(cfg Config, rdb redis.UniversalClient, reader *streams.Reader, log *slog.Logger) *Hub {
	if cfg.Buffer == 0 {
		cfg.Buffer = 256
	}
	if cfg.Poll == 0 {
		cfg.Poll = 2 * time.Second
	}
	return &Hub{cfg: cfg, rdb: rdb, reader: reader, log: log, feeds: map[string]*feed{}, byChan: map[string]*feed{}}
}

// Start opens the Pub/Sub connection and its dispatcher.
func (h *Hub) Start(ctx context.Context) error {
	h.ctx, h.cancel = context.WithCancel(context.WithoutCancel(ctx))
	h.ps = h.rdb.Subscribe(h.ctx)
	ch := h.ps.Channel(redis.WithChannelSize(1024))
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		for msg := range ch {
			h.mu.Lock()
			f := h.byChan[msg.Channel]
			h.mu.Unlock()
			if f != nil {
				f.notify(msg.Payload)
			}
		}
	}()
	return nil
}

// Stop closes every feed and the Pub/Sub connection. Safe twice or before Start.
func (h *Hub) Stop(context.Context) error {
	if h.cancel == nil {
		return nil
	}
	h.cancel()
	h.mu.Lock()
	ps := h.ps
	h.ps = nil
	h.mu.Unlock()
	if ps != nil {
		_ = ps.Close()
	}
	h.wg.Wait()
	return nil
}

// Sessions counts sessions with local subscribers.
func (h *Hub) Sessions() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.feeds)
}

// Subscriber receives a session's new entries.
type Subscriber struct {
	C <-chan Delivery
	// Overflowed is closed when the subscriber fell behind and was cut loose.
	Overflowed <-chan struct{}

	ch       chan Delivery
	overflow chan struct{}
	once     sync.Once
	feed     *feed
}

// Subscribe registers a subscriber for a session's entries appended from now on (entries may also
// include some older ones; callers skip what they have sent).
func (h *Hub) Subscribe(ctx context.Context, sessionID string) (*Subscriber, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ctx == nil || h.ctx.Err() != nil {
		return nil, errors.New("hub is stopped")
	}
	f := h.feeds[sessionID]
	if f == nil {
		k := h.reader.Keys(sessionID)
		if err := h.ps.Subscribe(ctx, k.Notify); err != nil {
			return nil, err
		}
		st, err := h.reader.State(ctx, sessionID)
		if err != nil {
			_ = h.ps.Unsubscribe(context.WithoutCancel(ctx), k.Notify)
			return nil, err
		}
		f = &feed{hub: h, session: sessionID, channel: k.Notify, epoch: st.Epoch, last: st.LastID,
			subs: map[*Subscriber]struct{}{}, poke: make(chan struct{}, 1), stop: make(chan struct{})}
		h.feeds[sessionID] = f
		h.byChan[k.Notify] = f
		h.wg.Add(1)
		go func() { defer h.wg.Done(); f.run(h.ctx) }()
	}
	s := &Subscriber{ch: make(chan Delivery, h.cfg.Buffer), overflow: make(chan struct{}), feed: f}
	s.C, s.Overflowed = s.ch, s.overflow
	f.mu.Lock()
	f.subs[s] = struct{}{}
	f.mu.Unlock()
	return s, nil
}

// Unsubscribe removes a subscriber; the feed ends with its last subscriber.
func (h *Hub) Unsubscribe(s *Subscriber) {
	f := s.feed
	h.mu.Lock()
	defer h.mu.Unlock()
	f.mu.Lock()
	delete(f.subs, s)
	empty := len(f.subs) == 0
	f.mu.Unlock()
	if empty && h.feeds[f.session] == f {
		delete(h.feeds, f.session)
		delete(h.byChan, f.channel)
		close(f.stop)
		if h.ps != nil {
			_ = h.ps.Unsubscribe(context.Background(), f.channel)
		}
	}
}

type feed struct {
	hub     *Hub
	session string
	channel string
	poke    chan struct{}
	stop    chan struct{}

	mu    sync.Mutex
	subs  map[*Subscriber]struct{}
	epoch string
	last  streams.EntryID
}

func (f *feed) notify(payload string) {
	if epoch, _, ok := strings.Cut(payload, ":"); ok {
		f.mu.Lock()
		if f.epoch != epoch {
			// A new stream generation: entries of the old one are gone, and IDs restart. Read the new
			// generation from its beginning; subscribers notice the epoch change and reset.
			f.epoch = epoch
			f.last = streams.EntryID{}
		}
		f.mu.Unlock()
	}
	select {
	case f.poke <- struct{}{}:
	default:
	}
}

func (f *feed) run(ctx context.Context) {
	t := time.NewTicker(f.hub.cfg.Poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.stop:
			return
		case <-f.poke:
		case <-t.C:
		}
		f.readNew(ctx)
	}
}

func (f *feed) readNew(ctx context.Context) {
	for {
		f.mu.Lock()
		last, epoch := f.last, f.epoch
		f.mu.Unlock()
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		entries, err := f.hub.reader.After(rctx, f.session, last, 512)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				f.hub.log.Warn("read session stream failed", "session_id", f.session, "err", err)
			}
			return
		}
		if len(entries) == 0 {
			return
		}
		f.mu.Lock()
		if f.epoch != epoch {
			f.mu.Unlock()
			continue // the generation changed under us; read again from its start
		}
		for _, e := range entries {
			d := Delivery{Epoch: epoch, Entry: e}
			for s := range f.subs {
				select {
				case s.ch <- d:
				default:
					s.once.Do(func() { close(s.overflow) })
				}
			}
		}
		f.last = entries[len(entries)-1].ID
		f.mu.Unlock()
		if len(entries) < 512 {
			return
		}
	}
}
