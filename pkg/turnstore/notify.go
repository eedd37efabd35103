package turnstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// CancelListener is a connection of its own that LISTENs for the cancel notifications of the
// store's schema: migration 00010 makes Postgres NOTIFY the channel "<schema>.turn_cancel" with the
// turn ID when a running turn's cancel flag is set. It is used by one goroutine at a time.
type CancelListener struct {
	conn *pgx.Conn
}

// ListenCancels takes a connection out of the pool for good (a LISTENing connection must never go
// back to it) and starts listening on it. The caller closes the listener.
func (s *Store) ListenCancels(ctx context.Context) (*CancelListener, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("acquire listening connection: %w", err)
	}
	l := &CancelListener{conn: conn.Hijack()}
	var schema string
	if err := l.conn.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		l.Close(ctx)
		return nil, fmt.Errorf("read current schema: %w", err)
	}
	if _, err := l.conn.Exec(ctx, "LISTEN "+pgx.Identifier{schema + ".turn_cancel"}.Sanitize()); err != nil {
		l.Close(ctx)
		return nil, fmt.Errorf("listen for cancels: %w", err)
	}
	return l, nil
}

// Next waits for the next notification, or for ctx to end, and returns its payload: the ID of a
// turn whose cancellation was requested while it ran, as text.
func (l *CancelListener) Next(ctx context.Context) (string, error) {
	n, err := l.conn.WaitForNotification(ctx)
	if err != nil {
		return "", fmt.Errorf("wait for cancel notification: %w", err)
	}
	return n.Payload, nil
}

// Close closes the connection. ctx may have ended (that is how listening usually stops): closing
// still gets a second.
func (l *CancelListener) Close(ctx context.Context) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	_ = l.conn.Close(cctx)
}
