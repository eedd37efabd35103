package turnstore

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/google/uuid"

	"github.com/turnstile-run/turnstile/pkg/pgarray"
)

// QueuedParams are the accepted turns one statement records as queued, as column arrays with one
// element per turn.
type QueuedParams struct {
	TurnIDs pgarray.UUIDs
	// SessionKeys are the turns' session keys, each a wire.SessionKey's String form.
	SessionKeys pgarray.Texts
	Tenants     pgarray.Texts
	AcceptedAt  pgarray.Times
	Deadlines   pgarray.Times
	// NeedSession marks the turns whose session's row is written too, unless it exists (a session
	// is its tenant's by its key, wire.SessionKey; the row is otherwise written with its first
	// completion).
	NeedSession pgarray.Bools
	// ClientTurnIDs are the IDs the clients minted (wire.ClientTurnKey), nil where the
	// turn ID is the client's already.
	ClientTurnIDs []*uuid.UUID
	// The rest is what the turn's Kafka record holds beyond the above, so the record can be
	// produced again from the row (intake's re-driver): the inputs' texts (the statement builds
	// the stored object, as the claim does), the metadata objects as JSON (nil for none), the
	// multitask strategies and W3C traceparents (empty for none), and where the record went:
	// partition, offset and the topic's ID (nil when intake did not know it).
	Inputs       pgarray.Texts
	Metadata     [][]byte
	Multitasks   []*string
	Traceparents []*string
	Partitions   pgarray.Ints
	Offsets      pgarray.Ints
	TopicIDs     []*uuid.UUID
	// Notifications are the turns' webhooks, push configs and tasks, stored with a row the
	// statement inserts (a row that exists already keeps its own); the push configs are stored
	// for every turn of p.
	Notifications Notifications
	// Agents are the turns' agents (pkg/agents); an empty element is the default agent (NULL).
	Agents pgarray.Texts
	// Priorities are the turns' priorities (wire.Envelope.PriorityOf).
	Priorities pgarray.Ints
}

// The insert takes the rows as arrays. DISTINCT ON keeps one row per turn (the earliest) when
// retries of one keyed request arrive in the same batch; on conflict the turn keeps whatever row
// it has already (written by an earlier request, a worker's claim or a cancel: a queued row never
// overwrites progress), except that a row the claim of this very record wrote first (same
// partition and offset) learns the topic's ID, which only intake knows, so the re-driver can
// tell whether that record is lost.
var (
	//go:embed queued.sql
	queuedTemplate string
	//go:embed queued_sessions.sql
	queuedSessionsCTE string

	// insertQueuedSQL is the usual statement: the turns' rows alone.
	insertQueuedSQL = include(queuedWithConfigs, "queued_sessions.sql", "")
	// insertQueuedWithSessionsSQL also writes the rows of the sessions of turns marked NeedSession.
	insertQueuedWithSessionsSQL = include(queuedWithConfigs, "queued_sessions.sql", queuedSessionsCTE)

	queuedWithConfigs = include(queuedTemplate, "push_configs.sql", pushConfigsCTE)
)

// InsertQueued records the turns of p as queued, in one statement, and returns how many rows it
// inserted (or completed with the topic's ID): a turn that has a row already (an earlier
// request's, a worker's claim, a cancel) keeps it. The sessions of turns marked NeedSession get their row unless they have one.
func (s *Store) InsertQueued(ctx context.Context, p *QueuedParams) (int64, error) {
	sql := insertQueuedSQL
	for _, need := range p.NeedSession {
		if need {
			sql = insertQueuedWithSessionsSQL
			break
		}
	}
	urls, tokens, configs, tasks := p.Notifications.args()
	tag, err := s.pool.Exec(ctx, sql, p.TurnIDs, p.SessionKeys, p.Tenants, p.AcceptedAt, p.Deadlines, p.NeedSession,
		p.ClientTurnIDs, p.Inputs, p.Metadata, p.Multitasks, p.Traceparents, p.Partitions, p.Offsets, p.TopicIDs,
		urls, tokens, configs, tasks, p.Agents, p.Priorities)
	if err != nil {
		return 0, fmt.Errorf("record queued turns: %w", err)
	}
	return tag.RowsAffected(), nil
}
