package turnstore

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/turnstile-run/turnstile/pkg/wire"
)

// AttemptEnd is what the statement ending an attempt records of it in the attempt's row
// (turn_attempts, which the admin timeline reads), beside the outcome and error it stores anyway.
type AttemptEnd struct {
	// Upstream is the endpoint the attempt's last upstream request went to, "" if none was sent.
	Upstream string
	// Events counts the events the attempt published, its terminal event included; Waits its
	// announced waits on its upstream.
	Events int
	Waits  int
}

// FinishTurn ends a running turn held with token with a terminal status other than succeeded
// (ErrFenced if the token is not the turn's), and the attempt's row with end. A non-empty
// deadLetter marks the turn as owed to the dead-letter topic for that reason (see
// ClearDeadLetter), and records it for good in dead_lettered, which the admin API lists dead
// letters by.
func (s *Store) FinishTurn(ctx context.Context, turnID uuid.UUID, token wire.FenceToken, status wire.Status, msg, deadLetter string, end AttemptEnd) error {
	var n int
	err := s.pool.QueryRow(ctx, `WITH ended AS (
		UPDATE turns SET status = $3, error = nullif($4, ''), finished_at = now(),
			dead_letter_reason = nullif($5, ''), dead_lettered = nullif($5, ''), lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
		WHERE turn_id = $1 AND fencing_token = $2 AND status = 'running'
		RETURNING turn_id
	), attempt AS (`+endAttemptSQL+`)
	SELECT count(*) FROM ended`, turnID, token, string(status), msg, deadLetter, end.Upstream, end.Events, end.Waits).Scan(&n)
	if err != nil {
		return fmt.Errorf("finish turn as %s: %w", status, err)
	}
	if n == 0 {
		return ErrFenced
	}
	return nil
}

// endAttemptSQL is the CTE that ends an attempt's row, $1 and $2 naming it, once the CTE ended
// (the statement's change of the turn's row, conditional on the token) returned it; $3 is the
// outcome, $4 the error, $6 to $8 the AttemptEnd.
const endAttemptSQL = `
		UPDATE turn_attempts SET ended_at = now(), outcome = $3, error = nullif($4, ''), upstream = nullif($6, ''),
			events = $7, waits = $8
		WHERE turn_id = $1 AND fencing_token = $2 AND EXISTS (SELECT 1 FROM ended)`

// FinishUnleased ends a turn that nobody holds (queued, or running with an expired lease) with a
// terminal status, and returns the fresh token its final events are published with and its
// attempt. ErrFenced means the turn is held or ended, and was left alone.
func (s *Store) FinishUnleased(ctx context.Context, turnID uuid.UUID, status wire.Status, msg, deadLetter string) (token wire.FenceToken, attempt int, err error) {
	err = s.pool.QueryRow(ctx, `
		UPDATE turns SET status = $2, error = nullif($3, ''), finished_at = now(), dead_letter_reason = nullif($4, ''),
			dead_lettered = nullif($4, ''), fencing_token = nextval('fencing_token_seq'), lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
		WHERE turn_id = $1 AND (status = 'queued' OR (status = 'running' AND lease_expires_at < now()))
		RETURNING fencing_token, attempt`, turnID, string(status), msg, deadLetter).Scan(&token, &attempt)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, ErrFenced
	}
	if err != nil {
		return 0, 0, fmt.Errorf("finish unleased turn as %s: %w", status, err)
	}
	return token, attempt, nil
}

// ExpireParams is the turn the expiry statement records, as its record in Kafka describes it.
type ExpireParams struct {
	TurnID  uuid.UUID
	Session wire.SessionKey
	Tenant  string
	// Input is the input's text: the statement builds the stored input object from it.
	Input string
	// Metadata is the metadata object as JSON.
	Metadata   []byte
	AcceptedAt time.Time
	Deadline   time.Time
	Partition  int32
	Offset     int64
	// Error is the message stored as the turn's error.
	Error string
	// Webhook, PushConfigs and Task are the turn's notifications (see Notifications), stored
	// with the row when the statement inserts it; the push configs in every case.
	Webhook     *wire.Webhook
	PushConfigs []wire.PushConfig
	Task        *uuid.UUID
}

// expireSQL ends a turn that must not start because its deadline is too near: it is recorded
// expired without ever being claimed (no attempt, no start time). A turn leased by a live worker,
// already finished, or cancelled is left alone.
//
//go:embed expire.sql
var expireTemplate string

var expireSQL = include(expireTemplate, "push_configs.sql", pushConfigsCTE)

// ExpireTurn records the turn as expired unless someone holds it, it ended or its cancellation was
// requested, and returns the fresh token its turn.expired event is published with. ErrFenced means
// it was left alone.
func (s *Store) ExpireTurn(ctx context.Context, p *ExpireParams) (token wire.FenceToken, attempt int, err error) {
	var n Notifications
	n.Add(0, p.Webhook, p.PushConfigs, p.Task, 1)
	urls, tokens, configs, tasks := n.args()
	err = s.pool.QueryRow(ctx, expireSQL, p.TurnID, p.Session, p.Tenant, p.Input, p.Metadata, p.AcceptedAt,
		p.Deadline, p.Error, p.Partition, p.Offset, urls, tokens, configs, tasks).Scan(&token, &attempt)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, ErrFenced
	}
	if err != nil {
		return 0, 0, fmt.Errorf("expire turn: %w", err)
	}
	return token, attempt, nil
}

// Final is the outcome of a finished turn, for re-publishing its terminal event after a crash.
type Final struct {
	Status  wire.Status
	Attempt int
	Token   wire.FenceToken
	Output  wire.Output
	Error   string
	// DeadLetter is the reason the turn is still owed to the dead-letter topic, or empty.
	DeadLetter string
	// Partition and Offset place the turn's record (the one its last claim, or intake, recorded);
	// -1 when the row names none.
	Partition int32
	Offset    int64
}

// ReadFinal reads a finished turn's outcome.
func (s *Store) ReadFinal(ctx context.Context, turnID uuid.UUID) (Final, error) {
	var f Final
	var status string
	var out []byte
	err := s.pool.QueryRow(ctx, `SELECT status, attempt, fencing_token, output, coalesce(error, ''),
		coalesce(dead_letter_reason, ''), coalesce(kafka_partition, -1), coalesce(kafka_offset, -1)
		FROM turns WHERE turn_id = $1`, turnID).
		Scan(&status, &f.Attempt, &f.Token, &out, &f.Error, &f.DeadLetter, &f.Partition, &f.Offset)
	if err != nil {
		return Final{}, fmt.Errorf("read finished turn: %w", err)
	}
	f.Status = wire.Status(status)
	if len(out) > 0 {
		_ = json.Unmarshal(out, &f.Output)
	}
	return f, nil
}

// ClearDeadLetter records that the turn's dead letter was acknowledged by Kafka: it is no longer
// owed to the dead-letter topic.
func (s *Store) ClearDeadLetter(ctx context.Context, turnID uuid.UUID) error {
	if _, err := s.pool.Exec(ctx, `UPDATE turns SET dead_letter_reason = NULL WHERE turn_id = $1`, turnID); err != nil {
		return fmt.Errorf("record dead letter: %w", err)
	}
	return nil
}
