package cancelwatch

import (
	"context"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/turnstile-run/turnstile/pkg/lifecycle"
)

// Watcher listens for cancel notifications.
type Watcher struct {
	pool     *pgxpool.Pool
	onCancel func(uuid.UUID)
	log      *slog.Logger
	// Listening, if set, is called each time the watcher (re)starts listening (tests wait on it).
	Listening func()

	loop lifecycle.Loop
}

// New returns a watcher that calls onCancel with the ID of every running turn whose cancellation was
// requested. onCancel must be fast.
func New(pool *pgxpool.Pool, onCancel func(uuid.UUID), log *slog.Logger) *Watcher {
	return &Watcher{pool: pool, onCancel: onCancel, log: log}
}

// Start begins listening in the background and returns at once.
func (w *Watcher) Start(ctx context.Context) error {
	w.loop.Start(ctx, w.run)
	return nil
}

// Stop ends listening and waits. Safe twice or before Start.
func (w *Watcher) Stop(ctx context.Context) error { return w.loop.Stop(ctx, "cancel watcher") }

func (w *Watcher) run(ctx context.Context) {
	delay := 100 * time.Millisecond
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
		delay = min(2*delay, 5*time.Second)
	}
}

// listen holds one connection until it fails or ctx ends.
func (w *Watcher) listen(ctx context.Context) error {
	conn, err := w.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// The connection is LISTENing: it must never go back to the pool.
	pc := conn.Hijack()
	defer func() {
		// ctx may have ended (that is how listening stops); closing still gets a second.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = pc.Close(cctx)
	}()
	var schema string
	if err := pc.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		return err
	}
	if _, err := pc.Exec(ctx, "LISTEN "+pgx.Identifier{schema + ".turn_cancel"}.Sanitize()); err != nil {
		return err
	}
	if w.Listening != nil {
		w.Listening()
	}
	for {
		n, err := pc.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		id, err := uuid.Parse(n.Payload)
		if err != nil {
			w.log.Warn("ignoring a malformed cancel notification", "payload", n.Payload)
			continue
		}
		w.onCancel(id)
	}
}
