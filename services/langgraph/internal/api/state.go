package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/pkg/region"
	"github.com/turnstile-run/turnstile/pkg/turnstore"
	"github.com/turnstile-run/turnstile/pkg/wire"
	"github.com/turnstile-run/turnstile/services/langgraph/internal/render"
	"github.com/turnstile-run/turnstile/services/langgraph/internal/threads"
)

// A thread's state set through the API (threads.updateState, threads.copy) becomes a checkpoint
// of its own and, in the same request, the session history the agent reads (turnstore
// RewriteHistory): the thread's next run answers from the edited messages. Messages pair up as the
// history stores them, a human message's text with the AI answer after it.

type updateStateBody struct {
	Values       json.RawMessage `json:"values"`
	Checkpoint   json.RawMessage `json:"checkpoint"`
	CheckpointID string          `json:"checkpoint_id"`
	AsNode       string          `json:"as_node"`
}

// inMessage is a message of an update's values.
type inMessage struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	ID      string          `json:"id"`
	Content json.RawMessage `json:"content"`
}

// updateState answers POST /threads/{thread_id}/state (the SDK's threads.updateState, a human in
// the loop editing the thread): values.messages are merged into the thread's messages as
// LangGraph's messages reducer does (a message with an existing ID replaces it, type "remove"
// deletes it, any other is appended), the result is the thread's new head checkpoint, and the next
// run's agent sees it. A thread with a run queued or running is a 409; a checkpoint other than the
// head a 409 stale-checkpoint.
func (h *Handler) updateState(w http.ResponseWriter, r *http.Request) {
	const route = "update_state"
	c, th, ok := h.thread(w, r, route)
	if !ok {
		return
	}
	var body updateStateBody
	if p := h.decodeBody(w, r, &body); p != nil {
		h.refuse(w, route, *p)
		return
	}
	var values struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if !isObject(body.Values) || json.Unmarshal(body.Values, &values) != nil {
		h.refuse(w, route, httpx.ProblemValidation.Problem(`values must be {"messages": [...]}: a thread's state is its messages`))
		return
	}
	var other map[string]json.RawMessage
	_ = json.Unmarshal(body.Values, &other)
	delete(other, "messages")
	if len(other) > 0 {
		h.refuse(w, route, httpx.ProblemValidation.Problem("values may hold messages only: a thread's state is its messages"))
		return
	}
	if p := h.checkHead(r, c, th.ID, runBody{Checkpoint: body.Checkpoint, CheckpointID: body.CheckpointID}); p != nil {
		h.refuse(w, route, *p)
		return
	}
	v, err := h.viewOf(r.Context(), c, th, th.ID)
	if err != nil {
		h.relay(w, r, route, err)
		return
	}
	if threadStatus(v.turns) == threads.StatusBusy {
		h.refuse(w, route, httpx.ProblemThreadBusy.Problem("thread "+th.ID+" has a run queued or running: its state changes when the run ends"))
		return
	}
	msgs := v.messages()
	for _, raw := range values.Messages {
		var m inMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			h.refuse(w, route, httpx.ProblemValidation.Problem("values.messages must be message objects"))
			return
		}
		msgs, err = merge(msgs, m)
		if err != nil {
			h.refuse(w, route, httpx.ProblemValidation.Problem(err.Error()))
			return
		}
	}
	// The newest run the new state includes: the session's newest, whatever its fate.
	afterRun := ""
	all, _, err := h.sessionTurns(r.Context(), c, th.ID)
	if err != nil {
		h.relay(w, r, route, err)
		return
	}
	if len(all) > 0 {
		afterRun = all[len(all)-1].TurnID
	}
	cp, ok := h.setState(w, r, route, c, th.ID, msgs, afterRun)
	if !ok {
		return
	}
	h.ok(route)
	httpx.WriteJSON(w, http.StatusOK, map[string]any{
		"checkpoint": checkpointJSON{ThreadID: th.ID, CheckpointID: cp},
	})
}

// setState stores msgs as the thread's state and rewrites its session's history to them,
// answering the refusal itself when it cannot; it returns the new checkpoint's ID.
func (h *Handler) setState(w http.ResponseWriter, r *http.Request, route string, c caller, threadID string, msgs []render.Message, afterRun string) (string, bool) {
	state, _ := json.Marshal(msgs)
	cp := region.NewID(h.cfg.Region.Code)
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.StoreTimeout)
	defer cancel()
	if _, err := turnstore.New(h.pool).RewriteHistory(ctx, c.tenant, wire.NewSessionKey(c.tenant, threadID), pairs(msgs)); err != nil {
		h.log.WarnContext(r.Context(), "rewrite session history failed", "session_id", threadID, "err", err)
		h.refuse(w, route, h.storeDown("the thread's state cannot be set now"))
		return "", false
	}
	_, err := h.threads.SetState(ctx, c.tenant, threadID, state, cp, afterRun)
	switch {
	case errors.Is(err, threads.ErrNotFound):
		h.refuse(w, route, httpx.ProblemThreadNotFound.Problem("no thread "+threadID))
		return "", false
	case err != nil:
		h.log.WarnContext(r.Context(), "set thread state failed", "session_id", threadID, "err", err)
		h.refuse(w, route, h.storeDown("the thread's state cannot be set now"))
		return "", false
	}
	h.log.InfoContext(r.Context(), "thread state set", "session_id", threadID, "checkpoint_id", cp, "messages", len(msgs))
	return cp, true
}

// merge applies one message of an update to msgs as LangGraph's messages reducer does.
func merge(msgs []render.Message, m inMessage) ([]render.Message, error) {
	kind := m.Type
	if kind == "" {
		kind = m.Role
	}
	switch kind {
	case "remove":
		if m.ID == "" {
			return nil, errors.New("a remove message names the message's id")
		}
		return slicesDelete(msgs, m.ID), nil
	case "human", "user":
		kind = "human"
	case "ai", "assistant":
		kind = "ai"
	default:
		return nil, errors.New("message type " + kind + " is not supported: a thread's state holds human and ai messages")
	}
	msg := render.Message{Type: kind, Content: contentText(m.Content), ID: m.ID}
	for i := range msgs {
		if m.ID != "" && msgs[i].ID == m.ID {
			msgs[i] = msg
			return msgs, nil
		}
	}
	if msg.ID == "" {
		msg.ID = kind + "-" + region.NewID("")
	}
	return append(msgs, msg), nil
}

func slicesDelete(msgs []render.Message, id string) []render.Message {
	out := msgs[:0:0]
	for _, m := range msgs {
		if m.ID != id {
			out = append(out, m)
		}
	}
	return out
}

// pairs is the session history of msgs: each human message's text with the AI answer after it
// (empty when there is none, as an answer without a question has an empty question).
func pairs(msgs []render.Message) []turnstore.HistoryPair {
	var out []turnstore.HistoryPair
	open := false
	for _, m := range msgs {
		switch m.Type {
		case "human":
			if open {
				out[len(out)-1].Answer = ""
			}
			out = append(out, turnstore.HistoryPair{Question: m.Content})
			open = true
		case "ai":
			if open {
				out[len(out)-1].Answer = m.Content
				open = false
				continue
			}
			out = append(out, turnstore.HistoryPair{Answer: m.Content})
		}
	}
	return out
}

// copyThread answers POST /threads/{thread_id}/copy (the SDK's threads.copy): a new thread (a
// minted ID) with the thread's metadata and its state as of now, whose runs go on from there
// apart from the original's.
func (h *Handler) copyThread(w http.ResponseWriter, r *http.Request) {
	const route = "copy_thread"
	c, th, ok := h.thread(w, r, route)
	if !ok {
		return
	}
	v, err := h.viewOf(r.Context(), c, th, th.ID)
	if err != nil {
		h.relay(w, r, route, err)
		return
	}
	id := region.NewID(h.cfg.Region.Code)
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.StoreTimeout)
	copied, _, err := h.threads.Create(ctx, c.tenant, id, th.Metadata, h.cfg.ThreadsMax)
	cancel()
	switch {
	case errors.Is(err, threads.ErrLimit):
		h.refuse(w, route, h.threadsLimit())
		return
	case err != nil:
		h.log.WarnContext(r.Context(), "copy thread failed", "session_id", th.ID, "err", err)
		h.refuse(w, route, h.storeDown("the thread cannot be copied now"))
		return
	}
	if msgs := v.messages(); len(msgs) > 0 || v.baseCP != "" {
		if _, ok := h.setState(w, r, route, c, id, msgs, ""); !ok {
			return
		}
	}
	tj, err := h.threadViewJSON(r.Context(), c, id, copied)
	if err != nil {
		h.relay(w, r, route, err)
		return
	}
	h.ok(route)
	httpx.WriteJSON(w, http.StatusOK, tj)
}

// threadViewJSON reads a thread again (after its state was set) and views it.
func (h *Handler) threadViewJSON(ctx context.Context, c caller, id string, fallback threads.Thread) (threadJSON, error) {
	sctx, cancel := context.WithTimeout(ctx, h.cfg.StoreTimeout)
	th, err := h.threads.Get(sctx, c.tenant, id)
	cancel()
	if err != nil {
		th = fallback
	}
	return h.viewThread(ctx, c, th)
}
