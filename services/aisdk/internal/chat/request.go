package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

// uiMessage is the part of the AI SDK's UIMessage a turn needs.
type uiMessage struct {
	ID    string `json:"id"`
	Role  string `json:"role"`
	Parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"parts"`
}

// chatRequest is DefaultChatTransport's POST body plus turnstile's optional members.
type chatRequest struct {
	ID        string         `json:"id"`
	Messages  []uiMessage    `json:"messages"`
	Trigger   string         `json:"trigger"`
	MessageID string         `json:"messageId"`
	Metadata  map[string]any `json:"metadata"`
	Multitask string         `json:"multitask"`
	// Agent names the catalog's agent the turn goes to (also /v1/agents/{name}/chat).
	Agent string `json:"agent"`
}

// The triggers DefaultChatTransport sends.
const (
	triggerSubmit     = "submit-message"
	triggerRegenerate = "regenerate-message"
)

// turn is what a valid request asks for.
type turn struct {
	chatID, text, messageID, trigger string
	metadata                         map[string]any
	multitask                        string
	agent                            string
}

// readRequest decodes and checks a POST; the problem says why a request is refused. w is given to
// the body's size limit so that the server closes the connection after a too-large body's answer
// instead of reading the rest of it (a client waiting on Expect: 100-continue gets its 413).
func readRequest(w http.ResponseWriter, r *http.Request, pathID, pathAgent string, maxBody int64) (turn, *httpx.Problem) {
	fail := func(t httpx.ProblemType, format string, args ...any) (turn, *httpx.Problem) {
		p := t.Problem(fmt.Sprintf(format, args...))
		return turn{}, &p
	}
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(strings.ToLower(ct), "application/json") {
		return fail(httpx.ProblemUnsupportedType, "the body must be application/json")
	}
	body, err := io.ReadAll(httpx.LimitBody(w, r, maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return fail(httpx.ProblemBodyTooLarge, "the body is larger than %d bytes", maxBody)
		}
		return fail(httpx.ProblemInvalidBody, "read the body: %v", err)
	}
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return fail(httpx.ProblemInvalidBody, "the body is not a chat request: %v", err)
	}
	id := req.ID
	if pathID != "" {
		if id != "" && id != pathID {
			return fail(httpx.ProblemValidation, "body id %q differs from the chat ID in the path", id)
		}
		id = pathID
	}
	if p := checkChatID(id); p != nil {
		return turn{}, p
	}
	if pathAgent != "" {
		if req.Agent != "" && req.Agent != pathAgent {
			return fail(httpx.ProblemValidation, "body agent %q differs from the agent in the path", req.Agent)
		}
		req.Agent = pathAgent
	}
	switch req.Trigger {
	case "", triggerSubmit, triggerRegenerate:
	default:
		return fail(httpx.ProblemValidation, "trigger must be %s or %s", triggerSubmit, triggerRegenerate)
	}
	if len(req.Messages) == 0 {
		return fail(httpx.ProblemValidation, "messages must end with the user's message")
	}
	last := req.Messages[len(req.Messages)-1]
	if last.Role != "user" {
		return fail(httpx.ProblemValidation, "the last message must have role user, not %q", last.Role)
	}
	var text strings.Builder
	for _, p := range last.Parts {
		if p.Type == "text" {
			text.WriteString(p.Text)
		}
	}
	if strings.TrimSpace(text.String()) == "" {
		return fail(httpx.ProblemValidation, "the last user message has no text")
	}
	return turn{
		chatID: id, text: text.String(), messageID: last.ID, trigger: req.Trigger,
		metadata: req.Metadata, multitask: req.Multitask, agent: req.Agent,
	}, nil
}

// checkChatID applies the session-ID rule to a chat ID, in intake's words.
func checkChatID(id string) *httpx.Problem {
	if !wire.SessionIDValid(id) {
		p := httpx.ProblemInvalidSession.Problem("the chat id is the session ID and must be " + wire.SessionIDRule)
		return &p
	}
	if id == "." || id == ".." {
		p := httpx.ProblemInvalidSession.Problem(`the chat id must not be "." or ".."`)
		return &p
	}
	return nil
}

// idempotencyKey names a submitted message, so a retried POST of it is the same turn. A
// regenerate asks for a new answer to the same message: it gets no key.
func (t turn) idempotencyKey() string {
	if t.trigger == triggerRegenerate || t.messageID == "" {
		return ""
	}
	// Intake derives the turn ID from the tenant, the session and the key, so the message ID
	// alone names the message.
	return "aisdk:" + t.messageID
}
