package tasks

import (
	"strings"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/google/uuid"

	"github.com/turnstile-run/turnstile/pkg/region"
)

// The mapping of turns to tasks is package a2atask's (shared with the notifier); what is here is
// the front door's own: message IDs to sessions, messages to turn input.

// EventIDKey is the metadata key of status and artifact events that repeats the event's SSE id.
const EventIDKey = "turnstile/event_id"

// startID is the SSE id of the Task that opens a stream: a cursor before the turn's first event.
const startID = "0"

// contextNamespace derives the session of a message sent without a contextId from its messageId.
var contextNamespace = uuid.MustParse("5d3c2b7e-8f0a-4e61-9c1d-2a7b4e5f6a80")

// contextFor is the session of a first message without contextId in region code (empty in
// single-region mode): "<region>-<uuidv5 of the messageId>", so a retried first message lands in
// the same session and a router places it by its ID.
func contextFor(code, messageID string) string {
	return region.Prefix(code, uuid.NewSHA1(contextNamespace, []byte(messageID)).String())
}

// messageText joins a message's text parts; ok is false when it holds any other part.
func messageText(m *a2a.Message) (text string, ok bool) {
	var b strings.Builder
	for _, p := range m.Parts {
		tp, isText := p.(a2a.TextPart)
		if !isText {
			return "", false
		}
		b.WriteString(tp.Text)
	}
	return b.String(), true
}

// acceptsText reports whether accepted output modes allow the text this agent answers with.
func acceptsText(modes []string) bool {
	if len(modes) == 0 {
		return true
	}
	for _, m := range modes {
		switch strings.ToLower(strings.TrimSpace(m)) {
		case "text", "text/plain", "text/*", "*/*", "*":
			return true
		}
	}
	return false
}
