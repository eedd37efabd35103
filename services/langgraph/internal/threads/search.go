package threads

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Statuses of a thread as LangGraph names them, derived from its session's newest run that was
// not deleted (DeleteRun): busy while it is queued or running, error when it failed or expired,
// idle otherwise (no run, or it succeeded or was cancelled).
const (
	StatusIdle = "idle"
	StatusBusy = "busy"
	StatusErr  = "error"
)

// Listed is a thread with its status, as a search answers it.
type Listed struct {
	Thread
	Status string
}

// Query is a search of a tenant's threads (LangGraph's POST /threads/search). Zero fields do not
// filter.
type Query struct {
	// Metadata is a JSON object the thread's metadata must contain (jsonb @>).
	Metadata json.RawMessage
	// IDs restricts the answer to these thread IDs.
	IDs []string
	// Status is idle, busy or error (interrupted never holds: turnstile's runs do not pause).
	Status string
	// SortBy is thread_id, status, created_at or updated_at (default); Desc sorts newest first.
	SortBy string
	Desc   bool
	Limit  int
	Offset int
}

// SortColumns are the sort_by values Search takes.
var SortColumns = map[string]string{
	"thread_id": "thread_id", "status": "status", "created_at": "created_at", "updated_at": "updated_at",
}

// searchSQL lists a tenant's threads with each one's status, read from its session's newest turn
// (turns_session_idx) that was not deleted through the API.
const searchSQL = `SELECT ` + columns + `, status FROM (
    SELECT th.*,
        CASE WHEN t.status IN ('queued', 'running') THEN 'busy'
             WHEN t.status IN ('failed', 'expired') THEN 'error'
             ELSE 'idle' END AS status
    FROM langgraph_threads th
    LEFT JOIN LATERAL (
        SELECT status FROM turns
        WHERE session_id = th.tenant || '/' || th.thread_id
          AND NOT EXISTS (SELECT 1 FROM langgraph_deleted_runs d
              WHERE d.tenant = th.tenant AND d.thread_id = th.thread_id AND d.run_id = turns.turn_id::text)
        ORDER BY accepted_at DESC LIMIT 1
    ) t ON true
    WHERE th.tenant = $1 AND th.metadata @> $2::jsonb AND ($3::text[] IS NULL OR th.thread_id = ANY($3::text[]))
) s
WHERE $4::text = '' OR status = $4::text`

// Search lists the tenant's threads matching q, sorted and paged as it says.
func (s *Store) Search(ctx context.Context, tenant string, q Query) ([]Listed, error) {
	md := q.Metadata
	if len(md) == 0 || string(md) == "null" {
		md = json.RawMessage(`{}`)
	}
	col, ok := SortColumns[q.SortBy]
	if !ok {
		col = "updated_at"
	}
	order := "ASC"
	if q.Desc {
		order = "DESC"
	}
	var ids []string
	if q.IDs != nil {
		ids = q.IDs
	}
	sql := searchSQL + ` ORDER BY ` + col + ` ` + order + `, thread_id ` + order + ` LIMIT $5 OFFSET $6`
	rows, err := s.pool.Query(ctx, sql, tenant, md, ids, q.Status, q.Limit, q.Offset)
	if err != nil {
		return nil, fmt.Errorf("search threads: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Listed, error) {
		var l Listed
		err := row.Scan(append(l.dest(), &l.Status)...)
		return l, err
	})
	if err != nil {
		return nil, fmt.Errorf("search threads: %w", err)
	}
	return out, nil
}

// Patch merges metadata into the thread's (LangGraph's PATCH /threads/{id}: top-level keys
// replaced, others kept) unless the merged object's JSON is over most bytes (ErrTooLarge).
func (s *Store) Patch(ctx context.Context, tenant, id string, metadata json.RawMessage, most int) (Thread, error) {
	if len(metadata) == 0 || string(metadata) == "null" {
		metadata = json.RawMessage(`{}`)
	}
	var t Thread
	var fits bool
	dest := append(t.dest(), &fits)
	err := s.pool.QueryRow(ctx, `WITH cur AS (
	        SELECT metadata || $3::jsonb AS merged FROM langgraph_threads WHERE tenant = $1 AND thread_id = $2
	    ), up AS (
	        UPDATE langgraph_threads th SET metadata = cur.merged, updated_at = now() FROM cur
	        WHERE th.tenant = $1 AND th.thread_id = $2 AND length(cur.merged::text) <= $4
	        RETURNING th.*
	    )
	    SELECT `+columns+`, true FROM up
	    UNION ALL SELECT $1::text, $2::text, cur.merged, now(), now(), NULL::jsonb, '', '', NULL::timestamptz, false
	    FROM cur WHERE NOT EXISTS (SELECT 1 FROM up)`,
		tenant, id, metadata, most).Scan(dest...)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Thread{}, ErrNotFound
	case err != nil:
		return Thread{}, fmt.Errorf("update thread: %w", err)
	case !fits:
		return Thread{}, ErrTooLarge
	}
	return t, nil
}

// ErrTooLarge is metadata over the thread's bound.
var ErrTooLarge = errors.New("the thread's metadata would be over its bound")

// DeleteRun hides a run of the thread (a turn of its session) from its runs; with rollback also
// from its state and history (a run cancelled with action=rollback). The turn's row stays until
// retention. Deleting a run twice is no error.
func (s *Store) DeleteRun(ctx context.Context, tenant, threadID, runID string, rollback bool) error {
	if _, err := s.pool.Exec(ctx, `INSERT INTO langgraph_deleted_runs (tenant, thread_id, run_id, rolled_back)
		VALUES ($1, $2, $3, $4) ON CONFLICT (tenant, thread_id, run_id) DO UPDATE SET rolled_back = langgraph_deleted_runs.rolled_back OR EXCLUDED.rolled_back`,
		tenant, threadID, runID, rollback); err != nil {
		return fmt.Errorf("delete run: %w", err)
	}
	return nil
}

// DeletedRuns lists the thread's deleted runs, each with whether it was rolled back.
func (s *Store) DeletedRuns(ctx context.Context, tenant, threadID string) (map[string]bool, error) {
	rows, err := s.pool.Query(ctx, `SELECT run_id, rolled_back FROM langgraph_deleted_runs WHERE tenant = $1 AND thread_id = $2`, tenant, threadID)
	if err != nil {
		return nil, fmt.Errorf("read deleted runs: %w", err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var id string
		var rb bool
		if err := rows.Scan(&id, &rb); err != nil {
			return nil, fmt.Errorf("read deleted runs: %w", err)
		}
		out[id] = rb
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read deleted runs: %w", err)
	}
	return out, nil
}

// SetState sets the thread's state (its messages, a JSON array) under a new checkpoint:
// afterRun is the newest run of the thread's session it includes (none: no run yet).
func (s *Store) SetState(ctx context.Context, tenant, id string, state json.RawMessage, checkpoint, afterRun string) (Thread, error) {
	t, err := scan(s.pool.QueryRow(ctx, `UPDATE langgraph_threads
		SET state = $3, state_checkpoint = $4, state_after_run = nullif($5, ''), state_at = now(), updated_at = now()
		WHERE tenant = $1 AND thread_id = $2 RETURNING `+columns, tenant, id, state, checkpoint, afterRun))
	if err != nil && !errors.Is(err, ErrNotFound) {
		return Thread{}, fmt.Errorf("set thread state: %w", err)
	}
	return t, err
}
