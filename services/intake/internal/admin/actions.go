package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/turnstile-run/turnstile/pkg/region"
	"github.com/turnstile-run/turnstile/pkg/streams"
	"github.com/turnstile-run/turnstile/pkg/turnstore"
	"github.com/turnstile-run/turnstile/pkg/wire"
	"github.com/turnstile-run/turnstile/services/intake/internal/announce"
)

// Outcomes of an action on one turn, as items and the audit log record them.
const (
	outcomeDone    = "done"
	outcomeSkipped = "skipped"
	outcomeFailed  = "failed"
)

// errLive is a replay of a turn that has not ended.
var errLive = errors.New("the turn has not ended: only a finished turn is replayed")

// actor acts on turns: the single-turn routes and the job runner share it.
type actor struct {
	pool     *pgxpool.Pool
	store    *turnstore.Store
	events   *streams.Publisher
	submit   Submitter
	region   string
	deadline time.Duration
	log      *slog.Logger
}

// cancel requests the cancellation of the stored turn id and says what it did: done (a live
// turn's cancel was requested, a queued one's ended at once) or skipped (it had ended).
func (a *actor) cancel(ctx context.Context, id uuid.UUID) (string, error) {
	var session wire.SessionKey
	var tenant string
	var client *uuid.UUID
	err := a.pool.QueryRow(ctx, `SELECT session_id, tenant, client_turn_id FROM turns WHERE turn_id = $1`, id).Scan(&session, &tenant, &client)
	if errors.Is(err, pgx.ErrNoRows) {
		return outcomeSkipped, nil
	}
	if err != nil {
		return "", fmt.Errorf("read turn: %w", err)
	}
	c, err := a.store.RequestCancel(ctx, id, session, tenant)
	if err != nil {
		return "", err
	}
	if c.Ended {
		announce.Ended(ctx, a.events, a.log, a.region, wire.StatusCancelled, []turnstore.Ended{{
			TurnID: id, Session: session, ClientTurnID: client, Token: c.Token, Attempt: c.Attempt,
			Error: turnstore.CancelledBeforeStart,
		}})
	}
	if !c.Live {
		return outcomeSkipped, nil
	}
	return outcomeDone, nil
}

// ReplayOptions change a replay from its original.
type ReplayOptions struct {
	// Agent names the agent of the catalog to run the replay on; the original's by default.
	Agent string `json:"agent,omitempty"`
	// Metadata is merged into the original's metadata (a key set to null removes it): the agent
	// settings a turn carries.
	Metadata map[string]any `json:"metadata,omitempty"`
}

func (o *ReplayOptions) validate(s Submitter) error {
	if _, ok := s.Agent(o.Agent); o.Agent != "" && !ok {
		return fmt.Errorf("agent %q is not in the catalog (GET /v1/agents)", o.Agent)
	}
	return nil
}

// replay submits newID as a replay of the stored turn orig — its session, its input, its
// metadata changed by opts — linked to it in turn_replays (with job, when a job made it), and
// returns the replay's session ID. Replaying with the same newID again submits the same turn
// again, which runs once.
func (a *actor) replay(ctx context.Context, orig, newID uuid.UUID, job *uuid.UUID, by string, opts ReplayOptions) error {
	var session wire.SessionKey
	var tenant, status, text, agent string
	var md map[string]any
	err := a.pool.QueryRow(ctx, `SELECT session_id, tenant, status, coalesce(input->>'text', ''), metadata, coalesce(agent, '')
		FROM turns WHERE turn_id = $1`, orig).Scan(&session, &tenant, &status, &text, &md, &agent)
	if errors.Is(err, pgx.ErrNoRows) {
		return turnstore.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("read turn: %w", err)
	}
	if status == string(wire.StatusQueued) || status == string(wire.StatusRunning) {
		return errLive
	}
	if md == nil {
		md = map[string]any{}
	}
	for k, v := range opts.Metadata {
		if v == nil {
			delete(md, k)
		} else {
			md[k] = v
		}
	}
	if len(md) == 0 {
		md = nil
	}
	if _, err := a.pool.Exec(ctx, `INSERT INTO turn_replays (turn_id, original_turn_id, tenant, job_id, created_by)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT (turn_id) DO NOTHING`, newID, orig, tenant, job, by); err != nil {
		return fmt.Errorf("link replay: %w", err)
	}
	if opts.Agent != "" {
		agent = opts.Agent
	}
	if name, ok := a.submit.Agent(agent); ok {
		agent = name
	}
	now := time.Now()
	return a.submit.Submit(ctx, wire.Envelope{
		TurnID: newID, SessionID: session.SessionID(), Tenant: tenant, Input: wire.Input{Text: text},
		Metadata: maps.Clone(md), Deadline: now.Add(a.deadline), AcceptedAt: now, Agent: agent,
	})
}

// replayID is the ID of a job's replay of orig: the same on every run of the job.
func replayID(job, orig uuid.UUID) uuid.UUID {
	return uuid.NewSHA1(job, orig[:])
}

// mustJSON encodes v for a jsonb column.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func (a *actor) showID(id uuid.UUID) string { return region.Prefix(a.region, id.String()) }
