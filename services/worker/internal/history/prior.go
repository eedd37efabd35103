package history

import (
	"context"
	"encoding/json"
	"time"

	"github.com/turnstile-run/turnstile/pkg/streams"
	"github.com/turnstile-run/turnstile/pkg/wire"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent"
)

// PriorPageDefault is how many stream entries a PriorReader reads per round trip unless its Page
// says otherwise.
const PriorPageDefault = 500

// PriorReader reads what earlier attempts of a turn published to its session stream, so a new
// attempt (after a takeover) can be told in agent.Turn.Prior and avoid repeating side effects.
type PriorReader struct {
	r *streams.Reader
	// Page is the number of entries read per round trip. Defaults to PriorPageDefault (500).
	Page int64
}

// NewPriorReader returns a reader over the session streams r reads.
func NewPriorReader(r *streams.Reader) *PriorReader {
	return &PriorReader{r: r, Page: PriorPageDefault}
}

// priorTypes are the events an agent's work leaves; lifecycle events are the worker's own.
var priorTypes = map[wire.EventType]bool{wire.EventDelta: true, wire.EventToolCall: true, wire.EventToolResult: true}

// Prior returns the deltas, tool calls and tool results earlier attempts (those before attempt)
// published for the turn, oldest first. It reads the session stream from the turn's acceptance
// (stream IDs are millisecond times; a minute of slack covers clock skew between hosts), so the
// turns before it in the session cost little.
func (p *PriorReader) Prior(ctx context.Context, session wire.SessionKey, turnID string, acceptedAt time.Time, attempt int) ([]agent.PriorEvent, error) {
	var from streams.EntryID
	if ms := acceptedAt.Add(-time.Minute).UnixMilli(); ms > 0 {
		from = streams.EntryID{Ms: uint64(ms)}
	}
	var out []agent.PriorEvent
	for {
		entries, err := p.r.After(ctx, session, from, p.Page)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if e.TurnID != turnID || !priorTypes[e.Type] {
				continue
			}
			var base wire.EventBase
			if json.Unmarshal([]byte(e.Data), &base) != nil || base.Attempt >= attempt {
				continue
			}
			out = append(out, agent.PriorEvent{Type: string(e.Type), Attempt: base.Attempt, Data: json.RawMessage(e.Data)})
		}
		if int64(len(entries)) < p.Page {
			return out, nil
		}
		from = entries[len(entries)-1].ID
	}
}
