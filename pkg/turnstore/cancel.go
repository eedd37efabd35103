package turnstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/turnstile-run/turnstile/pkg/region"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

// CancelledBeforeStart is the error a turn cancelled while queued ends with.
const CancelledBeforeStart = "cancelled before it started"

// Cancel is what a cancel request did to a turn.
type Cancel struct {
	// Live is whether the turn was still live (queued or running) when the request came.
	Live bool
	// Ended says the turn was queued and is now cancelled: Token and Attempt are the fresh token
	// and the attempt its turn.cancelled event is published with. A running turn is not ended
	// here: its worker sees the request (notification or next renewal) and ends it.
	Ended   bool
	Token   wire.FenceToken
	Attempt int
}

// requestCancelSQL marks a turn for cancellation. A queued turn (no attempt runs) is ended at once,
// with a fresh fencing token, so its cancel is terminal without waiting for a worker to read its
// record (which may have been lost): a worker that reads it later finds it DONE. A turn with no
// row yet gets a cancelled one, which its queued row and its claim leave as it is.
//
//go:embed request_cancel.sql
var requestCancelSQL string

// RequestCancel requests the cancellation of a turn (stored under turnID, in the tenant's session
// session) and reports what it did; cancelling a finished turn changes nothing.
func (s *Store) RequestCancel(ctx context.Context, turnID uuid.UUID, session wire.SessionKey, tenant string) (Cancel, error) {
	var c Cancel
	var status string
	err := s.pool.QueryRow(ctx, requestCancelSQL, turnID, session, tenant, CancelledBeforeStart).Scan(&status, &c.Token, &c.Attempt, &c.Ended)
	if errors.Is(err, pgx.ErrNoRows) {
		return Cancel{}, nil // already terminal
	}
	if err != nil {
		return Cancel{}, fmt.Errorf("request cancel: %w", err)
	}
	c.Live = true
	return c, nil
}

// Ended is a turn a statement ended without an attempt, with what its terminal event is
// published under.
type Ended struct {
	TurnID  uuid.UUID
	Session wire.SessionKey
	// ClientTurnID is the ID the client minted (the events show it), or nil.
	ClientTurnID *uuid.UUID
	Token        wire.FenceToken
	Attempt      int
	// Error is the turn's stored error: what its terminal event says.
	Error string
}

// ShownTurnID is the turn's ID as its client knows it (and its events show it) in region code
// (pkg/region; empty in single-region mode): the stores keep no region, so the caller names its
// own.
func (e *Ended) ShownTurnID(code string) string {
	id := e.TurnID
	if e.ClientTurnID != nil {
		id = *e.ClientTurnID
	}
	return region.Prefix(code, id.String())
}

//go:embed cancel_earlier.sql
var cancelEarlierSQL string

// CancelEarlier requests cancellation of every live turn of the session, other than except,
// accepted at or before acceptedAt, and returns how many it marked and the queued ones it ended at
// once (cancelled, with the token of their turn.cancelled event). A running turn's worker sees the
// request at its next lease renewal.
func (s *Store) CancelEarlier(ctx context.Context, session wire.SessionKey, except uuid.UUID, acceptedAt time.Time) (int64, []Ended, error) {
	rows, err := s.pool.Query(ctx, cancelEarlierSQL, session, except, acceptedAt, CancelledBeforeStart)
	if err != nil {
		return 0, nil, fmt.Errorf("cancel earlier turns: %w", err)
	}
	var n int64
	var ended []Ended
	for rows.Next() {
		var e Ended
		var isEnded bool
		if err := rows.Scan(&e.TurnID, &e.Session, &e.ClientTurnID, &e.Token, &e.Attempt, &isEnded); err != nil {
			rows.Close()
			return 0, nil, fmt.Errorf("cancel earlier turns: %w", err)
		}
		n++
		if isEnded {
			e.Error = CancelledBeforeStart
			ended = append(ended, e)
		}
	}
	if err := rows.Err(); err != nil {
		return 0, nil, fmt.Errorf("cancel earlier turns: %w", err)
	}
	return n, ended, nil
}
