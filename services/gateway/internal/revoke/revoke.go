package revoke

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/turnstile-run/turnstile/pkg/lifecycle"
)

// Defaults of Config.
const (
	// IntervalDefault is how often the watcher reads the revoked keys: the longest a revoked key's
	// stream token keeps working on a replica while Postgres answers.
	IntervalDefault = 2 * time.Second
	// ReadTimeoutDefault bounds one read.
	ReadTimeoutDefault = time.Second
)

// Source lists the IDs of the API keys revoked within window; apikey.RevokedWithin over a pool is
// the production one. It must be safe for concurrent use.
type Source interface {
	RevokedWithin(ctx context.Context, window time.Duration) ([]string, error)
}

// SourceFunc adapts a function to Source.
type SourceFunc func(ctx context.Context, window time.Duration) ([]string, error)

// RevokedWithin calls f.
func (f SourceFunc) RevokedWithin(ctx context.Context, window time.Duration) ([]string, error) {
	return f(ctx, window)
}

// Config tunes a Watcher. Zero fields take the defaults named.
type Config struct {
	// Window is how far back revocations matter: the stream-token TTL. Required.
	Window time.Duration
	// Interval defaults to IntervalDefault.
	Interval time.Duration
	// ReadTimeout defaults to ReadTimeoutDefault.
	ReadTimeout time.Duration
}

// Watcher keeps the set of revoked API key IDs. Its methods are safe for concurrent use; a nil
// *Watcher knows no revocation.
type Watcher struct {
	cfg  Config
	src  Source
	log  *slog.Logger
	loop lifecycle.Loop

	mu      sync.Mutex
	revoked map[string]struct{}
	changed chan struct{} // closed when revoked gains an ID, then replaced
	reads   chan struct{} // test signal: closed after each read, then replaced
}

// New returns a watcher; Start begins reading.
func New(cfg Config, src Source, log *slog.Logger) *Watcher {
	if cfg.Interval == 0 {
		cfg.Interval = IntervalDefault
	}
	if cfg.ReadTimeout == 0 {
		cfg.ReadTimeout = ReadTimeoutDefault
	}
	return &Watcher{
		cfg: cfg, src: src, log: log, revoked: map[string]struct{}{},
		changed: make(chan struct{}), reads: make(chan struct{}),
	}
}

// Start reads once at once, then every Interval, in a goroutine the watcher owns; it returns at
// once.
func (w *Watcher) Start(ctx context.Context) error {
	w.loop.Start(ctx, func(ctx context.Context) {
		w.read(ctx)
		lifecycle.Every(ctx, w.cfg.Interval, w.read)
	})
	return nil
}

// Stop ends the reads and waits for them. Safe twice and before Start.
func (w *Watcher) Stop(ctx context.Context) error { return w.loop.Stop(ctx, "revocation watcher") }

// Revoked reports whether the API key id is known to be revoked. "" (a token naming no key) never
// is.
func (w *Watcher) Revoked(id string) bool {
	if w == nil || id == "" {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.revoked[id]
	return ok
}

// Changed is closed when a key is newly known to be revoked; call it again for the next change.
// A nil watcher's channel is nil: it never fires.
func (w *Watcher) Changed() <-chan struct{} {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.changed
}

// read replaces the known set with the source's answer. A failed read keeps what is known: while
// Postgres is down streams go on and known revocations stay in force. IDs that left the window are
// dropped, as their tokens have expired.
func (w *Watcher) read(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, w.cfg.ReadTimeout)
	ids, err := w.src.RevokedWithin(rctx, w.cfg.Window)
	cancel()
	w.mu.Lock()
	defer w.mu.Unlock()
	defer func() { close(w.reads); w.reads = make(chan struct{}) }()
	if err != nil {
		if ctx.Err() == nil {
			w.log.Warn("read of revoked api keys failed; keeping the known ones", "err", err)
		}
		return
	}
	next := make(map[string]struct{}, len(ids))
	grew := false
	for _, id := range ids {
		next[id] = struct{}{}
		if _, ok := w.revoked[id]; !ok {
			grew = true
		}
	}
	w.revoked = next
	if grew {
		close(w.changed)
		w.changed = make(chan struct{})
	}
}

// nextRead is closed after the next read (tests).
func (w *Watcher) nextRead() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.reads
}
