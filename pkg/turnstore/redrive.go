package turnstore

import (
	"bytes"
	"cmp"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/turnstile-run/turnstile/pkg/pgarray"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

// The statements of intake's re-driver (package redrive): it takes the accepted turns whose Kafka
// record can no longer be consumed, produces their records again from their rows, and records
// where the new records went; and it ends the turns that can no longer start.
var (
	// takeLostSQL takes (sets redriven_at on) up to a limit of the oldest unfinished turns whose
	// record is lost, as TakeLost describes, and returns what their records held. FOR UPDATE SKIP
	// LOCKED and the redriven_at condition, which is checked again on a row another statement
	// changed meanwhile, let re-drivers of several intake replicas share the rows instead of each
	// re-driving every one.
	//
	//go:embed take_lost.sql
	takeLostSQL string
	// endUnstartableSQL ends up to a limit of unfinished turns nobody holds that can no longer
	// start: past their deadline (expired) or with a cancel requested (cancelled).
	//
	//go:embed end_unstartable.sql
	endUnstartableSQL string
)

// Topic is the state of the turns topic as Kafka reports it: its incarnation's ID (the zero UUID
// when the broker does not report one) and, per partition, the first and the next offset.
type Topic struct {
	ID           uuid.UUID
	StartOffsets []int64
	EndOffsets   []int64
}

// LostParams say which turns' records are lost: those of the topic's older incarnations (a
// recreated topic, a restarted embedded broker), those below their partition's start offset
// (expired by retention) or in a partition the topic no longer has, those at or above their
// partition's end offset that were accepted before AcceptedBefore (so their record was acknowledged
// before the end offsets were read: the log was truncated), and those whose record's place is not
// known (intake did not know the topic's ID, or the row predates the offsets) that were accepted
// before UnknownBefore. A row re-driven less than Hold ago is left alone.
type LostParams struct {
	Topic          Topic
	AcceptedBefore time.Time
	UnknownBefore  time.Time
	Hold           time.Duration
	Limit          int
	// Agent is the agent whose turns are taken, the one whose topic Topic is; with Default set
	// the rows of no agent (NULL, written before agents had names) are its too.
	Agent   string
	Default bool
}

// LostTurn is an unfinished turn whose record is lost, as its row holds it.
type LostTurn struct {
	Envelope wire.Envelope
	// Session is the session's key, the record's key.
	Session     wire.SessionKey
	Status      wire.Status
	Traceparent string
	// Redrives counts the times its record was produced again, this one included.
	Redrives int
	// HasInput says the row holds the turn's input: a row written before migration 00100 (or by
	// a cancel) does not, and such a turn cannot be re-driven.
	HasInput bool
}

// TakeLost takes up to p.Limit turns whose record is lost, oldest accepted first, and returns
// them in that order. The caller produces their records again and records where they went
// (Redriven), or lets go of them (Release) when it could not.
func (s *Store) TakeLost(ctx context.Context, p *LostParams) ([]LostTurn, error) {
	var topicID *uuid.UUID
	if p.Topic.ID != uuid.Nil {
		topicID = &p.Topic.ID
	}
	rows, err := s.pool.Query(ctx, takeLostSQL, p.AcceptedBefore, topicID, p.Topic.StartOffsets, p.Topic.EndOffsets,
		p.UnknownBefore, p.Limit, p.Hold.Milliseconds(), p.Agent, p.Default)
	if err != nil {
		return nil, fmt.Errorf("take lost turns: %w", err)
	}
	defer rows.Close()
	var out []LostTurn
	for rows.Next() {
		var l LostTurn
		var status string
		var client *uuid.UUID
		var input, metadata []byte
		var deadline *time.Time
		var agent *string
		e := &l.Envelope
		if err := rows.Scan(&e.TurnID, &l.Session, &e.Tenant, &client, &status, &input, &metadata, &e.Multitask,
			&l.Traceparent, &deadline, &e.AcceptedAt, &l.Redrives, &agent); err != nil {
			return nil, fmt.Errorf("take lost turns: %w", err)
		}
		l.Status = wire.Status(status)
		e.SessionID = l.Session.SessionID()
		if client != nil {
			e.ClientTurnID = *client
		}
		if deadline != nil {
			e.Deadline = *deadline
		}
		if agent != nil {
			e.Agent = *agent
		}
		var in map[string]json.RawMessage
		if json.Unmarshal(input, &in) == nil {
			if text, ok := in["text"]; ok && json.Unmarshal(text, &e.Input.Text) == nil {
				l.HasInput = true
			}
		}
		if len(metadata) > 0 {
			if err := json.Unmarshal(metadata, &e.Metadata); err != nil {
				return nil, fmt.Errorf("take lost turns: metadata of %s: %w", e.TurnID, err)
			}
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("take lost turns: %w", err)
	}
	// RETURNING keeps no order: acceptance order is what the records are produced in.
	sortLost(out)
	return out, nil
}

// RedrivenParams are where the records of re-driven turns went, one element per turn.
type RedrivenParams struct {
	TurnIDs    pgarray.UUIDs
	Partitions pgarray.Ints
	Offsets    pgarray.Ints
	// TopicID is the topic's ID as read before the records were produced (nil when unknown).
	TopicID *uuid.UUID
}

// Redriven records where the re-driven turns' records went, for the turns not finished meanwhile.
func (s *Store) Redriven(ctx context.Context, p *RedrivenParams) error {
	_, err := s.pool.Exec(ctx, `UPDATE turns t SET kafka_partition = r.kpart, kafka_offset = r.koff,
			kafka_topic_id = $4, updated_at = now()
		FROM unnest($1::uuid[], $2::integer[], $3::bigint[]) AS r(turn_id, kpart, koff)
		WHERE t.turn_id = r.turn_id AND t.status IN ('queued', 'running')`, p.TurnIDs, p.Partitions, p.Offsets, p.TopicID)
	if err != nil {
		return fmt.Errorf("record re-driven turns: %w", err)
	}
	return nil
}

// Release lets go of taken turns whose records could not be produced again, so the next round
// takes them at once.
func (s *Store) Release(ctx context.Context, ids pgarray.UUIDs) error {
	if _, err := s.pool.Exec(ctx, `UPDATE turns SET redriven_at = NULL, redrives = greatest(redrives - 1, 0)
		WHERE turn_id = ANY($1::uuid[])`, ids); err != nil {
		return fmt.Errorf("release lost turns: %w", err)
	}
	return nil
}

// EndUnstartable ends up to limit unfinished turns nobody holds that can no longer start — past
// their deadline (expired, with expiredMsg) or with a cancel requested (cancelled, with
// CancelledBeforeStart) — and returns them with their terminal status, oldest first.
func (s *Store) EndUnstartable(ctx context.Context, limit int, expiredMsg string) ([]Ended, []wire.Status, error) {
	rows, err := s.pool.Query(ctx, endUnstartableSQL, limit, CancelledBeforeStart, expiredMsg)
	if err != nil {
		return nil, nil, fmt.Errorf("end unstartable turns: %w", err)
	}
	defer rows.Close()
	var ended []Ended
	var statuses []wire.Status
	for rows.Next() {
		var e Ended
		var status string
		if err := rows.Scan(&e.TurnID, &e.Session, &e.ClientTurnID, &e.Token, &e.Attempt, &status, &e.Error); err != nil {
			return nil, nil, fmt.Errorf("end unstartable turns: %w", err)
		}
		ended, statuses = append(ended, e), append(statuses, wire.Status(status))
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("end unstartable turns: %w", err)
	}
	return ended, statuses, nil
}

// CountUnfinished returns how many accepted turns are queued, and how many are running.
func (s *Store) CountUnfinished(ctx context.Context) (queued, running int, err error) {
	err = s.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'queued'), count(*) FILTER (WHERE status = 'running')
		FROM turns WHERE status IN ('queued', 'running')`).Scan(&queued, &running)
	if err != nil {
		return 0, 0, fmt.Errorf("count unfinished turns: %w", err)
	}
	return queued, running, nil
}

func sortLost(ls []LostTurn) {
	slices.SortFunc(ls, func(a, b LostTurn) int {
		return cmp.Or(a.Envelope.AcceptedAt.Compare(b.Envelope.AcceptedAt), bytes.Compare(a.Envelope.TurnID[:], b.Envelope.TurnID[:]))
	})
}
