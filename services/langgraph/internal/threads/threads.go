package threads

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/turnstile-run/turnstile/pkg/wire"
)

// ErrNotFound is a thread that does not exist in the tenant's namespace (or belongs to another
// tenant, which is answered the same way).
var ErrNotFound = errors.New("thread not found")

// ErrLimit is a new thread for a tenant that has its most threads already.
var ErrLimit = errors.New("the tenant has its most threads")

// ErrBusy is a thread that cannot be deleted because a run of it is queued or running.
var ErrBusy = errors.New("a run of the thread is queued or running")

// Thread is one stored thread.
type Thread struct {
	Tenant    string
	ID        string
	Metadata  json.RawMessage // a JSON object, never null
	CreatedAt time.Time
	UpdatedAt time.Time
	// State is the thread's messages as set through the API (an edit or a copy), a JSON array, or
	// nil when its runs alone make its state. StateCheckpoint names that state's checkpoint;
	// StateAfterRun is the newest run (turn ID) it includes, the runs after it follow it; StateAt is
	// when it was set.
	State           json.RawMessage
	StateCheckpoint string
	StateAfterRun   string
	StateAt         *time.Time
}

// Store reads and writes threads over a pool.
type Store struct{ pool *pgxpool.Pool }

// New returns a store over pool.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

const columns = `tenant, thread_id, metadata, created_at, updated_at, state, coalesce(state_checkpoint, ''), coalesce(state_after_run, ''), state_at`

func scan(row pgx.Row) (Thread, error) {
	var t Thread
	err := row.Scan(t.dest()...)
	if errors.Is(err, pgx.ErrNoRows) {
		return Thread{}, ErrNotFound
	}
	return t, err
}

func (t *Thread) dest() []any {
	return []any{&t.Tenant, &t.ID, &t.Metadata, &t.CreatedAt, &t.UpdatedAt, &t.State, &t.StateCheckpoint, &t.StateAfterRun, &t.StateAt}
}

// Create stores a new thread and reports whether it was created. When the thread exists already
// it is returned unchanged with created false, and the caller decides (LangGraph's if_exists)
// whether that is an error. A new thread of a tenant that has most threads is ErrLimit: the
// count and the insert are one transaction under an advisory lock named by the tenant, so
// concurrent creations of one tenant pass the bound by none (creations of other tenants do not
// wait).
func (s *Store) Create(ctx context.Context, tenant, id string, metadata json.RawMessage, most int) (t Thread, created bool, err error) {
	if len(metadata) == 0 || string(metadata) == "null" {
		metadata = json.RawMessage(`{}`)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return Thread{}, false, fmt.Errorf("create thread: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	// An existing thread is answered as it is, whatever the count.
	t, err = scan(tx.QueryRow(ctx, `SELECT `+columns+` FROM langgraph_threads WHERE tenant = $1 AND thread_id = $2`, tenant, id))
	if !errors.Is(err, ErrNotFound) {
		if err != nil {
			return Thread{}, false, fmt.Errorf("create thread: %w", err)
		}
		return t, false, nil
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('langgraph_threads:' || $1, 0))`, tenant); err != nil {
		return Thread{}, false, fmt.Errorf("create thread: %w", err)
	}
	// A new statement: it sees what the lock's previous holder committed.
	var n int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM langgraph_threads WHERE tenant = $1`, tenant).Scan(&n); err != nil {
		return Thread{}, false, fmt.Errorf("count threads: %w", err)
	}
	t, err = scan(tx.QueryRow(ctx, `INSERT INTO langgraph_threads (tenant, thread_id, metadata)
		SELECT $1, $2, $3 WHERE $4::int < $5::int
		ON CONFLICT (tenant, thread_id) DO NOTHING RETURNING `+columns, tenant, id, metadata, n, most))
	switch {
	case err == nil:
		if err := tx.Commit(ctx); err != nil {
			return Thread{}, false, fmt.Errorf("create thread: %w", err)
		}
		return t, true, nil
	case !errors.Is(err, ErrNotFound):
		return Thread{}, false, fmt.Errorf("create thread: %w", err)
	}
	// Nothing inserted: the thread was created meanwhile, or the tenant is at its bound.
	_ = tx.Rollback(ctx)
	t, err = s.Get(ctx, tenant, id)
	if errors.Is(err, ErrNotFound) && n >= most {
		return Thread{}, false, ErrLimit
	}
	return t, false, err
}

// deleteSQL deletes a thread of a tenant unless its session ($3, wire.SessionKey) has a turn
// queued or running (turns_live_session_idx), and says whether the thread existed and whether it
// was busy, all read from one snapshot.
const deleteSQL = `WITH live AS (
    SELECT EXISTS (SELECT 1 FROM turns WHERE session_id = $3 AND status IN ('queued', 'running')) AS busy
), gone AS (
    DELETE FROM langgraph_threads WHERE tenant = $1 AND thread_id = $2 AND NOT (SELECT busy FROM live)
    RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM langgraph_threads WHERE tenant = $1 AND thread_id = $2),
    (SELECT busy FROM live), EXISTS (SELECT 1 FROM gone)`

// Delete deletes the tenant's thread: ErrNotFound when it has none of that ID, ErrBusy (nothing
// deleted) while a run of it is queued or running. sessionKey is the thread's session key
// (wire.SessionKey), whose turns are its runs. The runs are left to retention: deleting a
// finished turn's row before its Kafka record can no longer be redelivered would let the record
// run again.
func (s *Store) Delete(ctx context.Context, tenant, id string, session wire.SessionKey) error {
	var exists, busy, deleted bool
	if err := s.pool.QueryRow(ctx, deleteSQL, tenant, id, session).Scan(&exists, &busy, &deleted); err != nil {
		return fmt.Errorf("delete thread: %w", err)
	}
	switch {
	case deleted:
		return nil
	case !exists:
		return ErrNotFound
	case busy:
		return ErrBusy
	}
	// Deleted meanwhile by another statement.
	return ErrNotFound
}

// Get reads one thread of the tenant.
func (s *Store) Get(ctx context.Context, tenant, id string) (Thread, error) {
	t, err := scan(s.pool.QueryRow(ctx, `SELECT `+columns+` FROM langgraph_threads WHERE tenant = $1 AND thread_id = $2`, tenant, id))
	if err != nil && !errors.Is(err, ErrNotFound) {
		return Thread{}, fmt.Errorf("read thread: %w", err)
	}
	return t, err
}

// RunCreated records that a run of the assistant (of graph graphID) was created on the thread:
// its updated_at moves, and its metadata's graph_id and assistant_id name the run's, as the
// Platform stamps them, so a chat sidebar that lists an assistant's threads by metadata (as
// agent-chat-ui does, {"graph_id": …}) finds the thread.
func (s *Store) RunCreated(ctx context.Context, tenant, id, graphID, assistantID string) error {
	if _, err := s.pool.Exec(ctx, `UPDATE langgraph_threads
		SET updated_at = now(), metadata = metadata || jsonb_build_object('graph_id', $3::text, 'assistant_id', $4::text)
		WHERE tenant = $1 AND thread_id = $2`, tenant, id, graphID, assistantID); err != nil {
		return fmt.Errorf("record run on thread: %w", err)
	}
	return nil
}
