package chat

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"

	"github.com/go-chi/chi/v5"

	"github.com/turnstile-run/turnstile/pkg/frontdoor"
	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

// textPart and message are the UIMessage JSON useChat takes as its initial messages.
type textPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type message struct {
	ID       string         `json:"id"`
	Role     string         `json:"role"`
	Parts    []textPart     `json:"parts"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// messages answers the chat's turns as UIMessages, oldest first: each turn's input as a user
// message ("<turn id>-user"), and each finished turn's answer as an assistant message whose ID is
// the turn ID, the ID the turn's stream gives it. A turn that is not terminal has no assistant
// message yet: the resume route streams it. An unknown chat is an empty one.
func (h *Handler) messages(w http.ResponseWriter, r *http.Request) {
	const route = "messages"
	chatID := chi.URLParam(r, "chat_id")
	if p := checkChatID(chatID); p != nil {
		h.requests.WithLabelValues(route, "refused").Inc()
		httpx.WriteProblem(w, *p)
		return
	}
	cred := frontdoor.CredentialOf(r)
	var turns []frontdoor.Turn
	cursor := ""
	for len(turns) < h.cfg.HistoryLimit {
		page, err := h.fd.ListTurns(r.Context(), cred, chatID, min(100, h.cfg.HistoryLimit-len(turns)), cursor)
		if err != nil {
			var p *frontdoor.Problem
			if errors.As(err, &p) && p.Status == http.StatusNotFound {
				break
			}
			h.refuse(w, route, err)
			return
		}
		turns = append(turns, page.Turns...)
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	slices.Reverse(turns)
	out := make([]message, 0, 2*len(turns))
	for _, t := range turns {
		id := t.TurnID
		var in wire.Input
		_ = json.Unmarshal(t.Input, &in)
		out = append(out, message{ID: id + "-user", Role: "user", Parts: []textPart{{"text", in.Text}}})
		if !t.Status.Terminal() {
			continue
		}
		md := map[string]any{"turn_id": id, "status": string(t.Status)}
		var answer wire.Output
		_ = json.Unmarshal(t.Output, &answer)
		parts := []textPart{}
		if answer.Text != "" {
			parts = append(parts, textPart{"text", answer.Text})
		}
		if t.Error != "" {
			md["error"] = t.Error
		}
		out = append(out, message{ID: id, Role: "assistant", Parts: parts, Metadata: md})
	}
	h.requests.WithLabelValues(route, "listed").Inc()
	httpx.WriteJSON(w, http.StatusOK, out)
}
