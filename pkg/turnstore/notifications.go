package turnstore

import (
	_ "embed"
	"encoding/json"

	"github.com/google/uuid"

	"github.com/turnstile-run/turnstile/pkg/region"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

// Notifications are what the statements that write a turn's first row (InsertQueued, ClaimTurns,
// ExpireTurn) store about who is told of the turn's status changes, as column arrays with one
// element per turn: the webhook goes into the turn's own columns (webhook_url, webhook_token), the
// push configs into task_push_configs under the turn's task (ON CONFLICT DO NOTHING: a config
// already stored is kept as it is, and one deleted since is stored again by a later write of the
// same record), and the task into turns.task_id. They are written in the same statement as the
// turn's row, before the outbox trigger of that statement runs, so the status change the statement
// makes already owes each of them its notification (see the package doc's Outbox).
//
// A slice may be nil when no turn has such an element: the statement then reads NULL for every turn.
type Notifications struct {
	// Webhooks are the turns' webhooks (wire.Envelope.Webhook), nil for none.
	Webhooks []*wire.Webhook
	// PushConfigs are the turns' push configs (wire.Envelope.PushConfigs), nil for none.
	PushConfigs [][]wire.PushConfig
	// Tasks are the tasks the turns belong to (TaskOf), nil where a turn is its own task.
	Tasks []*uuid.UUID
}

// Add appends one turn's elements, keeping the slices nil while no turn has any.
func (n *Notifications) Add(i int, hook *wire.Webhook, configs []wire.PushConfig, task *uuid.UUID, size int) {
	if hook != nil {
		if n.Webhooks == nil {
			n.Webhooks = make([]*wire.Webhook, size)
		}
		n.Webhooks[i] = hook
	}
	if len(configs) > 0 {
		if n.PushConfigs == nil {
			n.PushConfigs = make([][]wire.PushConfig, size)
		}
		n.PushConfigs[i] = configs
	}
	if task != nil {
		if n.Tasks == nil {
			n.Tasks = make([]*uuid.UUID, size)
		}
		n.Tasks[i] = task
	}
}

// args are the statements' four arrays: webhook URLs and tokens (text[]), push configs (jsonb[],
// each a JSON array as wire.PushConfig encodes) and tasks (uuid[]); nil for an array no turn needs.
func (n *Notifications) args() (urls, tokens []*string, configs [][]byte, tasks []*uuid.UUID) {
	if n.Webhooks != nil {
		urls, tokens = make([]*string, len(n.Webhooks)), make([]*string, len(n.Webhooks))
		for i, h := range n.Webhooks {
			if h == nil {
				continue
			}
			urls[i] = &h.URL
			if h.Token != "" {
				tokens[i] = &h.Token
			}
		}
	}
	if n.PushConfigs != nil {
		configs = make([][]byte, len(n.PushConfigs))
		for i, cs := range n.PushConfigs {
			if len(cs) > 0 {
				// Plain strings and string slices: encoding cannot fail.
				configs[i], _ = json.Marshal(cs)
			}
		}
	}
	return urls, tokens, configs, n.Tasks
}

// pushConfigsCTE is the body of a CTE that stores push configs with their tasks: it reads the
// turns of a CTE notify (turn_id, tenant, push_configs, task_id) that the statement defines
// before it.
//
//go:embed push_configs.sql
var pushConfigsCTE string

// TaskLinkKey is the turn metadata member that names the A2A task a follow-up turn belongs to,
// {"a2a": {"task_id": "<the task's first turn's ID>"}}, written by the A2A front door
// (pkg/a2atask.Link).
const TaskLinkKey = "a2a"

// TaskOf is the task a turn with metadata md belongs to, as turns.task_id stores it: the turn its
// metadata's TaskLinkKey member names by task_id (bare or region-prefixed, region.ParseUUID), or
// nil when it names none, or none that parses — the turn is then its own task. A malformed name
// is ignored rather than failing the statement that writes the turn.
func TaskOf(md map[string]any) *uuid.UUID {
	link, _ := md[TaskLinkKey].(map[string]any)
	id, _ := link["task_id"].(string)
	if id == "" {
		return nil
	}
	_, u, err := region.ParseUUID(id)
	if err != nil {
		return nil
	}
	return &u
}
