package turnstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/turnstile-run/turnstile/pkg/wire"
)

// ErrNotFound is returned when no row exists for the turn.
var ErrNotFound = errors.New("turn not found")

// Turn is the read model of a turn.
type Turn struct {
	TurnID uuid.UUID `json:"turn_id"`
	// Session is the session's key, what the row stores; SessionID is its client's session ID,
	// what the API shows.
	Session   wire.SessionKey `json:"-"`
	SessionID string          `json:"session_id"`
	Tenant    string          `json:"-"`
	Status    wire.Status     `json:"status"`
	Attempt   int             `json:"attempts"`
	Input     json.RawMessage `json:"input,omitempty"`
	Output    json.RawMessage `json:"output,omitempty"`
	// Metadata is the turn's metadata as the client posted it; empty until a worker claims the turn
	// (the queued row does not hold it).
	Metadata   json.RawMessage `json:"metadata,omitempty"`
	Error      string          `json:"error,omitempty"`
	AcceptedAt time.Time       `json:"accepted_at"`
	Deadline   *time.Time      `json:"deadline,omitempty"`
	StartedAt  *time.Time      `json:"started_at,omitempty"`
	FinishedAt *time.Time      `json:"finished_at,omitempty"`
	CancelReq  bool            `json:"cancel_requested"`
	// ClientTurnID is the ID the client minted for the turn, or nil: TurnID is then derived from
	// it (wire.ClientTurnKey) and the API shows this one.
	ClientTurnID *uuid.UUID `json:"-"`
}

// Shown is a turn as the native API shows it and its clients (the protocol front doors) read it:
// its ID is text, the one the client knows ("<region>-<uuid>" in a region, pkg/region), where
// the stored Turn's TurnID is the bare UUID.
type Shown struct {
	Turn
	TurnID string `json:"turn_id"`
}

// Store wraps a pool.
type Store struct{ pool *pgxpool.Pool }

// New returns a store over pool.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

const turnColumns = `turn_id, session_id, tenant, status, attempt, input, output, metadata, coalesce(error, ''),
	accepted_at, deadline, started_at, finished_at, cancel_requested, client_turn_id`

func scanTurn(row pgx.Row) (Turn, error) {
	var t Turn
	var status string
	err := row.Scan(&t.TurnID, &t.Session, &t.Tenant, &status, &t.Attempt, &t.Input, &t.Output, &t.Metadata, &t.Error,
		&t.AcceptedAt, &t.Deadline, &t.StartedAt, &t.FinishedAt, &t.CancelReq, &t.ClientTurnID)
	t.Status = wire.Status(status)
	t.SessionID = t.Session.SessionID()
	return t, err
}

// Get reads one turn.
func (s *Store) Get(ctx context.Context, turnID uuid.UUID) (Turn, error) {
	t, err := scanTurn(s.pool.QueryRow(ctx, `SELECT `+turnColumns+` FROM turns WHERE turn_id = $1`, turnID))
	if errors.Is(err, pgx.ErrNoRows) {
		return Turn{}, ErrNotFound
	}
	if err != nil {
		return Turn{}, fmt.Errorf("read turn: %w", err)
	}
	return t, nil
}

// ListSession returns up to limit turns of a session, newest first, accepted before the given time
// (zero means no bound).
func (s *Store) ListSession(ctx context.Context, session wire.SessionKey, before time.Time, limit int) ([]Turn, error) {
	if before.IsZero() {
		before = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	rows, err := s.pool.Query(ctx, `SELECT `+turnColumns+` FROM turns
		WHERE session_id = $1 AND accepted_at < $2 ORDER BY accepted_at DESC, turn_id DESC LIMIT $3`,
		session, before, limit)
	if err != nil {
		return nil, fmt.Errorf("list session turns: %w", err)
	}
	defer rows.Close()
	var out []Turn
	for rows.Next() {
		t, err := scanTurn(rows)
		if err != nil {
			return nil, fmt.Errorf("scan turn: %w", err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}
