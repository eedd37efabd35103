package uistream

import (
	"encoding/json"

	"github.com/turnstile-run/turnstile/pkg/wire"
)

// Resumer renders a turn from its first event for a client whose cursor covers some of it: the
// parts of covered events are rendered (to keep the Renderer's state) and dropped. When the cursor
// falls inside an open text part, the first part sent re-opens it (a `text-start` of the same id),
// since a reader that starts from this stream has not seen the part begin; an AI SDK reader then
// holds the text in two parts whose concatenation is the answer.
type Resumer struct {
	r   *Renderer
	cur Cursor
	// sent says a part was sent; skipped says an event was covered before.
	sent, skipped bool
}

// NewResumer renders turnID for a client at cur (the zero Cursor: from the start).
func NewResumer(turnID string, cur Cursor) *Resumer {
	return &Resumer{r: NewRenderer(turnID), cur: cur}
}

// Done reports whether the turn's terminal part was rendered.
func (s *Resumer) Done() bool { return s.r.Done() }

// Render returns the parts to send for the native event id.
func (s *Resumer) Render(id string, typ wire.EventType, data json.RawMessage) ([]Part, error) {
	wasOpen, openID := s.r.textOpen, s.r.textID
	parts, err := s.r.Render(typ, data)
	if err != nil {
		return nil, err
	}
	if s.cur.Covers(id) {
		s.skipped = true
		return nil, nil
	}
	if len(parts) == 0 {
		return nil, nil
	}
	if !s.sent && s.skipped && wasOpen {
		parts = append([]Part{{"type": "text-start", "id": openID}}, parts...)
	}
	s.sent = true
	return parts, nil
}
