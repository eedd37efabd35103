package cancelwatch

import (
	"context"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/turnstile-run/turnstile/pkg/lifecycle"
	"github.com/turnstile-run/turnstile/pkg/turnstore"
)

// Reconnect backoff: after a lost connection the watcher waits ReconnectDelayFirst, doubling each
// failure in a row up to ReconnectDelayCeiling. Renewals report cancels meanwhile.
const (
	ReconnectDelayFirst   = 100 * time.Millisecond
	ReconnectDelayCeiling = 5 * time.Second
)

// Watcher listens for cancel notifications.
type Watcher struct {
	db       *turnstore.Store
	onCancel func(uuid.UUID)
	log      *slog.Logger
	// Listening, if set, is called each time the watcher (re)starts listening (tests wait on it).
	Listening func()

	loop lifecycle.Loop
}

// New returns a watcher that calls onCancel with the ID of every running turn whose cancellation was
// requested. onCancel must be fast.
func New(pool *pgxpool.Pool, onCancel func(uuid.UUID), log *slog.Logger) *Watcher {
	return &Watcher{db: turnstore.New(pool), onCancel: onCancel, log: log}
}

// Start begins listening in the background and returns at once.
func (w *Watcher) Start(ctx context.Context) error {
	w.loop.Start(ctx, w.run)
	return nil
}

// Stop ends listening and waits. Safe twice or before Start.
func (w *Watcher) Stop(ctx context.Context) error { return w.loop.Stop(ctx, "cancel watcher") }

func (w *Watcher) run(ctx context.Context) {
	delay := ReconnectDelayFirst
	for ctx.Err() == nil {
		err := w.listen(ctx)
		if ctx.Err() != nil {
			return
		}
		w.log.Warn("cancel notifications interrupted; renewals still report cancels; reconnecting", "err", err, "in", delay)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		delay = min(2*delay, ReconnectDelayCeiling)
	}
}

// listen holds one connection until it fails or ctx ends.
func (w *Watcher) listen(ctx context.Context) error {
	l, err := w.db.ListenCancels(ctx)
	if err != nil {
		return err
	}
	defer l.Close(ctx)
	if w.Listening != nil {
		w.Listening()
	}
	for {
		payload, err := l.Next(ctx)
		if err != nil {
			return err
		}
		id, err := uuid.Parse(payload)
		if err != nil {
			w.log.Warn("ignoring a malformed cancel notification", "payload", payload)
			continue
		}
		w.onCancel(id)
	}
}
