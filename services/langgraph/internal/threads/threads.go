package threads

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrNotFound is a thread that does not exist in the tenant's namespace (or belongs to another
// tenant, which is answered the same way).
var ErrNotFound = errors.New("thread not found")

// Thread is one stored thread.
type Thread struct {
	Tenant    string
	ID        string
	Metadata  json.RawMessage // a JSON object, never null
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Store reads and writes threads over a pool.
type Store struct{ pool *pgxpool.Pool }

// New returns a store over pool.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

const columns = `tenant, thread_id, metadata, created_at, updated_at`

func scan(row pgx.Row) (Thread, error) {
	var t Thread
	err := row.Scan(&t.Tenant, &t.ID, &t.Metadata, &t.CreatedAt, &t.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Thread{}, ErrNotFound
	}
	return t, err
}

// Create stores a new thread and reports whether it was created. When the thread exists already
// it is returned unchanged with created false, and the caller decides (LangGraph's if_exists)
// whether that is an error.
func (s *Store) Create(ctx context.Context, tenant, id string, metadata json.RawMessage) (t Thread, created bool, err error) {
	if len(metadata) == 0 || string(metadata) == "null" {
		metadata = json.RawMessage(`{}`)
	}
	t, err = scan(s.pool.QueryRow(ctx, `INSERT INTO langgraph_threads (tenant, thread_id, metadata)
		VALUES ($1, $2, $3) ON CONFLICT (tenant, thread_id) DO NOTHING RETURNING `+columns, tenant, id, metadata))
	if err == nil {
		return t, true, nil
	}
	if !errors.Is(err, ErrNotFound) {
		return Thread{}, false, fmt.Errorf("create thread: %w", err)
	}
	// The row exists (the insert did nothing): return it as it is.
	t, err = s.Get(ctx, tenant, id)
	return t, false, err
}

// Get reads one thread of the tenant.
func (s *Store) Get(ctx context.Context, tenant, id string) (Thread, error) {
	t, err := scan(s.pool.QueryRow(ctx, `SELECT `+columns+` FROM langgraph_threads WHERE tenant = $1 AND thread_id = $2`, tenant, id))
	if err != nil && !errors.Is(err, ErrNotFound) {
		return Thread{}, fmt.Errorf("read thread: %w", err)
	}
	return t, err
}

// Touch records that a run was created on the thread (LangGraph's updated_at).
func (s *Store) Touch(ctx context.Context, tenant, id string) error {
	if _, err := s.pool.Exec(ctx, `UPDATE langgraph_threads SET updated_at = now() WHERE tenant = $1 AND thread_id = $2`, tenant, id); err != nil {
		return fmt.Errorf("touch thread: %w", err)
	}
	return nil
}
