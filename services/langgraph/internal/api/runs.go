package api

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/turnstile-run/turnstile/pkg/frontdoor"
	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/pkg/wire"
	"github.com/turnstile-run/turnstile/services/langgraph/internal/render"
	"github.com/turnstile-run/turnstile/services/langgraph/internal/threads"
)

// metaKey is the member of a turn's metadata that records what the run was created with.
const metaKey = "langgraph"

// runMeta is that member.
type runMeta struct {
	AssistantID string        `json:"assistant_id"`
	StreamMode  []render.Mode `json:"stream_mode"`
	Multitask   string        `json:"multitask_strategy"`
}

// runJSON is LangGraph's Run.
type runJSON struct {
	RunID       string         `json:"run_id"`
	ThreadID    string         `json:"thread_id"`
	AssistantID string         `json:"assistant_id"`
	CreatedAt   time.Time      `json:"created_at"`
	UpdatedAt   time.Time      `json:"updated_at"`
	Status      string         `json:"status"` // pending, running, error, success, timeout, interrupted
	Metadata    map[string]any `json:"metadata"`
	Multitask   string         `json:"multitask_strategy"`
	Kwargs      map[string]any `json:"kwargs"`
}

// runStatus is LangGraph's name of a turn status.
func runStatus(s wire.Status) string {
	switch s {
	case wire.StatusQueued:
		return "pending"
	case wire.StatusRunning:
		return "running"
	case wire.StatusSucceeded:
		return "success"
	case wire.StatusFailed:
		return "error"
	case wire.StatusCancelled:
		return "interrupted"
	case wire.StatusExpired:
		return "timeout"
	}
	return string(s)
}

// splitMeta reads native metadata (a turn's or a schedule's) into the client's own members, which
// it returns, and the member this front door keeps under metaKey, which it decodes into own (a
// *runMeta or *cronMeta). Metadata that is not an object reads as empty.
func splitMeta(raw json.RawMessage, own any) map[string]any {
	md := map[string]any{}
	_ = json.Unmarshal(raw, &md)
	if v, ok := md[metaKey]; ok {
		b, _ := json.Marshal(v)
		_ = json.Unmarshal(b, own)
		delete(md, metaKey)
	}
	return md
}

// viewRun is the Run a turn of the thread is.
func viewRun(threadID string, t frontdoor.Turn) runJSON {
	var rm runMeta
	md := splitMeta(t.Metadata, &rm)
	updated := t.AcceptedAt
	for _, ts := range []*time.Time{t.StartedAt, t.FinishedAt} {
		if ts != nil {
			updated = *ts
		}
	}
	return runJSON{
		RunID: t.TurnID, ThreadID: threadID, AssistantID: rm.AssistantID,
		CreatedAt: t.AcceptedAt, UpdatedAt: updated, Status: runStatus(t.Status), Metadata: md,
		Multitask: rm.Multitask, Kwargs: map[string]any{},
	}
}

// runBody is the body of the run-creating routes (what the SDK sends; the rest is ignored).
type runBody struct {
	AssistantID     string          `json:"assistant_id"`
	Input           json.RawMessage `json:"input"`
	Command         json.RawMessage `json:"command"`
	Metadata        map[string]any  `json:"metadata"`
	StreamMode      json.RawMessage `json:"stream_mode"`
	Multitask       string          `json:"multitask_strategy"`
	IfNotExists     string          `json:"if_not_exists"`
	Checkpoint      json.RawMessage `json:"checkpoint"`
	CheckpointID    string          `json:"checkpoint_id"`
	InterruptBefore json.RawMessage `json:"interrupt_before"`
	InterruptAfter  json.RawMessage `json:"interrupt_after"`
	AfterSeconds    float64         `json:"after_seconds"`
	Webhook         string          `json:"webhook"`
	OnDisconnect    string          `json:"on_disconnect"` // continue or cancel
	OnCompletion    string          `json:"on_completion"` // delete or keep (stateless runs)
}

// newRun is a validated run request.
type newRun struct {
	caller
	thread threads.Thread
	text   string
	modes  []render.Mode
	body   runBody
	// agent is the catalog's agent the assistant resolved to when the run was checked ("" for the
	// default agent).
	agent string
	// stateless: the thread is the run's throwaway one (POST /runs, /runs/stream, /runs/wait).
	stateless bool
}

// cancelOnDisconnect says whether the run is cancelled when its stream's client leaves: asked
// with on_disconnect=cancel, and the default of a stateless run, as on the Platform.
func (nr newRun) cancelOnDisconnect() bool {
	return nr.body.OnDisconnect == "cancel" || (nr.stateless && nr.body.OnDisconnect == "")
}

// parseRun authenticates, reads and checks a run-creating request, and finds (or, with
// if_not_exists=create, makes) its thread; a stateless run (no thread in the path) gets a
// throwaway thread of its own. Nothing is queued before every check passed.
func (h *Handler) parseRun(w http.ResponseWriter, r *http.Request, route string, stateless bool) (newRun, bool) {
	c, p := h.authenticate(r)
	if p != nil {
		h.refuse(w, route, *p)
		return newRun{}, false
	}
	var body runBody
	if p := h.decodeBody(w, r, &body); p != nil {
		h.refuse(w, route, *p)
		return newRun{}, false
	}
	modes, err := render.ParseModes(body.StreamMode)
	if err != nil {
		h.refuse(w, route, httpx.ProblemValidation.Problem(err.Error()))
		return newRun{}, false
	}
	if body.Multitask == "" {
		body.Multitask = "reject" // LangGraph's default
	}
	var text string
	refusal := ""
	switch {
	case body.AssistantID == "":
		refusal = "assistant_id is required"
	case body.Multitask == "rollback":
		refusal = "multitask_strategy rollback is not supported: turnstile never deletes a run; use interrupt (the running run is cancelled and kept) or reject"
	case body.Multitask != "reject" && body.Multitask != "enqueue" && body.Multitask != "interrupt":
		refusal = "multitask_strategy must be reject, enqueue or interrupt"
	case body.IfNotExists != "" && body.IfNotExists != "create" && body.IfNotExists != "reject":
		refusal = "if_not_exists must be create or reject"
	case isSet(body.Command):
		refusal = "command (resuming an interrupt) is not supported: turnstile's runs do not pause for input"
	case body.OnDisconnect != "" && body.OnDisconnect != "cancel" && body.OnDisconnect != "continue":
		refusal = "on_disconnect must be cancel or continue"
	case body.OnCompletion != "" && body.OnCompletion != "delete" && body.OnCompletion != "keep":
		refusal = "on_completion must be delete or keep"
	case stateless && (isSet(body.Checkpoint) || body.CheckpointID != ""):
		refusal = "checkpoint is not supported on a stateless run: its thread is new"
	case isSet(body.InterruptBefore) || isSet(body.InterruptAfter):
		refusal = "interrupt_before and interrupt_after are not supported"
	case body.AfterSeconds != 0:
		refusal = "after_seconds is not supported"
	case body.Webhook != "":
		refusal = "webhook is not supported on this route"
	default:
		if text, refusal = inputText(body.Input); refusal != "" {
			break
		}
		if _, reserved := body.Metadata[metaKey]; reserved {
			refusal = "metadata." + metaKey + " is reserved"
		}
	}
	if refusal != "" {
		h.refuse(w, route, httpx.ProblemValidation.Problem(refusal))
		return newRun{}, false
	}
	agent, ok := h.agentOf(body.AssistantID)
	if !ok {
		h.refuse(w, route, httpx.ProblemAssistantNotFound.Problem("no assistant "+body.AssistantID+" (TURNSTILE_LANGGRAPH_ASSISTANTS)"))
		return newRun{}, false
	}
	if stateless {
		return h.throwawayThread(w, r, route, newRun{caller: c, text: text, modes: modes, body: body, agent: agent})
	}
	threadID := chi.URLParam(r, "thread_id")
	th, p := h.loadThread(r, c, threadID)
	if p != nil && p.Type == httpx.ProblemThreadNotFound.Name && body.IfNotExists == "create" && wire.SessionIDValid(threadID) {
		ctx, cancel := context.WithTimeout(r.Context(), h.cfg.StoreTimeout)
		var err error
		th, _, err = h.threads.Create(ctx, c.tenant, threadID, nil, h.cfg.ThreadsMax)
		cancel()
		switch {
		case errors.Is(err, threads.ErrLimit):
			pp := h.threadsLimit()
			p = &pp
		case err != nil:
			pp := h.storeDown("the thread cannot be stored now")
			p = &pp
		default:
			p = nil
		}
	}
	if p == nil && (isSet(body.Checkpoint) || body.CheckpointID != "") {
		p = h.checkHead(r, c, th.ID, body)
	}
	if p != nil {
		h.refuse(w, route, *p)
		return newRun{}, false
	}
	return newRun{caller: c, thread: th, text: text, modes: modes, body: body, agent: agent}, true
}

// inputText is the turn input of a run's input: the text of its human messages, joined by blank
// lines, or a refusal.
func inputText(raw json.RawMessage) (string, string) {
	const shape = `input must be {"messages": [...]} with at least one human message of text`
	if !isSet(raw) {
		return "", shape
	}
	var in struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return "", shape
	}
	var parts []string
	for _, m := range in.Messages {
		var msg struct {
			Type    string          `json:"type"`
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		}
		if err := json.Unmarshal(m, &msg); err != nil {
			var s string // a bare string is a human message
			if json.Unmarshal(m, &s) != nil {
				return "", shape
			}
			msg.Type, msg.Content = "human", m
		}
		kind := msg.Type
		if kind == "" {
			kind = msg.Role
		}
		if kind != "human" && kind != "user" {
			continue
		}
		if t := contentText(msg.Content); t != "" {
			parts = append(parts, t)
		}
	}
	if len(parts) == 0 {
		return "", shape
	}
	return strings.Join(parts, "\n\n"), ""
}

// contentText reads a message's content: a string, or a list of content blocks whose text blocks
// count.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &blocks) != nil {
		return ""
	}
	var parts []string
	for _, b := range blocks {
		if b.Type == "text" && b.Text != "" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// post queues the run as a turn of the thread's session.
func (h *Handler) post(r *http.Request, nr newRun) (frontdoor.Accepted, error) {
	md := make(map[string]any, len(nr.body.Metadata)+1)
	for k, v := range nr.body.Metadata {
		md[k] = v
	}
	md[metaKey] = runMeta{AssistantID: nr.body.AssistantID, StreamMode: nr.modes, Multitask: nr.body.Multitask}
	// The caller's deadline is the turn's, as on the native API.
	dl, err := frontdoor.ParseDeadline(r.Header.Get(frontdoor.DeadlineHeader))
	if err != nil {
		return frontdoor.Accepted{}, err
	}
	// The assistant's agent was resolved when the run was checked; one the catalog dropped since
	// is refused by intake (404 agent-not-found), before anything reaches Kafka.
	acc, err := h.fd.PostTurn(r.Context(), nr.cred, nr.thread.ID, frontdoor.TurnRequest{
		Input: wire.Input{Text: nr.text}, Metadata: md, Multitask: nr.body.Multitask, Agent: nr.agent,
	}, frontdoor.PostOptions{IdempotencyKey: r.Header.Get("Idempotency-Key"), Deadline: dl})
	if err != nil {
		return acc, err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), h.cfg.StoreTimeout)
	defer cancel()
	if err := h.threads.RunCreated(ctx, nr.tenant, nr.thread.ID, h.assistant(nr.body.AssistantID).GraphID, nr.body.AssistantID); err != nil {
		// updated_at and the stamped assistant are informational; the run is queued either way.
		h.log.WarnContext(r.Context(), "record run on thread failed", "session_id", nr.thread.ID, "turn_id", acc.TurnID, "err", err)
	}
	h.log.DebugContext(r.Context(), "run created", "session_id", nr.thread.ID, "turn_id", acc.TurnID, "assistant_id", nr.body.AssistantID, "agent", nr.agent)
	return acc, nil
}

// createdRun is the Run just queued.
func createdRun(nr newRun, acc frontdoor.Accepted) runJSON {
	md := nr.body.Metadata
	if md == nil {
		md = map[string]any{}
	}
	now := time.Now().UTC()
	return runJSON{
		RunID: acc.TurnID, ThreadID: nr.thread.ID, AssistantID: nr.body.AssistantID, CreatedAt: now, UpdatedAt: now,
		Status: "pending", Metadata: md, Multitask: nr.body.Multitask, Kwargs: map[string]any{},
	}
}

func runPath(threadID, runID string) string { return "/threads/" + threadID + "/runs/" + runID }

func (h *Handler) createRun(w http.ResponseWriter, r *http.Request) {
	const route = "create_run"
	nr, ok := h.parseRun(w, r, route, false)
	if !ok {
		return
	}
	h.createRunOf(w, r, route, nr)
}

func (h *Handler) createRunOf(w http.ResponseWriter, r *http.Request, route string, nr newRun) {
	acc, err := h.post(r, nr)
	if err != nil {
		h.relay(w, r, route, err)
		h.dropThrowaway(r, nr)
		return
	}
	if nr.stateless && nr.body.OnCompletion != "keep" {
		h.deleteWhenDone(r, nr, acc)
	}
	h.ok(route)
	w.Header().Set("Content-Location", runPath(nr.thread.ID, acc.TurnID))
	httpx.WriteJSON(w, http.StatusOK, createdRun(nr, acc))
}

// waitRun queues the run, waits for it to end and answers the thread's values then (LangGraph's
// runs/wait); a failed run answers its error as __error__, as LangGraph does.
func (h *Handler) waitRun(w http.ResponseWriter, r *http.Request) {
	const route = "wait_run"
	nr, ok := h.parseRun(w, r, route, false)
	if !ok {
		return
	}
	h.waitRunOf(w, r, route, nr)
}

func (h *Handler) waitRunOf(w http.ResponseWriter, r *http.Request, route string, nr newRun) {
	acc, err := h.post(r, nr)
	if err != nil {
		h.relay(w, r, route, err)
		h.dropThrowaway(r, nr)
		return
	}
	w.Header().Set("Content-Location", runPath(nr.thread.ID, acc.TurnID))
	done := h.answerWhenDone(w, r, route, nr.caller, nr.thread.ID, acc.TurnID, acc.StreamToken)
	h.afterStateless(r, nr, acc.TurnID, done)
}

// joinRun waits for a run to end and answers the thread's values (LangGraph's runs/join).
func (h *Handler) joinRun(w http.ResponseWriter, r *http.Request) {
	const route = "join_run"
	c, th, t, ok := h.run(w, r, route)
	if !ok {
		return
	}
	token := ""
	if !t.Status.Terminal() {
		g, err := h.fd.StreamToken(r.Context(), c.cred, th.ID)
		if err != nil {
			h.relay(w, r, route, err)
			return
		}
		token = g.StreamToken
	}
	h.answerWhenDone(w, r, route, c, th.ID, t.TurnID, token)
}

// answerWhenDone follows the run's native stream (when token is set) to its terminal event, then
// answers the thread's values; it says whether the run was seen to its end.
func (h *Handler) answerWhenDone(w http.ResponseWriter, r *http.Request, route string, c caller, threadID, runID, token string) bool {
	if token != "" {
		tracked := h.Track(nil)
		defer tracked.Release()
		if err := h.waitTerminal(r.Context(), tracked.Done(), threadID, runID, token); err != nil {
			h.relay(w, r, route, err)
			return false
		}
	}
	v, err := h.threadView(r.Context(), c, threadID)
	if err != nil {
		h.relay(w, r, route, err)
		return true
	}
	out := map[string]any{"messages": v.messages()}
	for _, t := range v.turns {
		if t.TurnID == runID && (t.Status == wire.StatusFailed || t.Status == wire.StatusExpired) {
			out["__error__"] = map[string]string{"error": "AgentError", "message": t.Error}
		}
	}
	h.ok(route)
	httpx.WriteJSON(w, http.StatusOK, out)
	return true
}

// waitTerminal reads the run's native stream until its terminal event.
func (h *Handler) waitTerminal(ctx context.Context, drained <-chan struct{}, threadID, runID, token string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-drained:
			cancel()
		case <-ctx.Done():
		}
	}()
	st, err := h.fd.OpenStream(ctx, frontdoor.StreamRequest{SessionID: threadID, Token: token, TurnID: runID})
	if err != nil {
		return err
	}
	defer func() { _ = st.Close() }()
	for {
		ev, err := st.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if ev.Type.Terminal() || ev.Type == wire.EventStreamReset {
			return nil
		}
	}
}

func (h *Handler) getRun(w http.ResponseWriter, r *http.Request) {
	const route = "get_run"
	_, th, t, ok := h.run(w, r, route)
	if !ok {
		return
	}
	h.ok(route)
	httpx.WriteJSON(w, http.StatusOK, viewRun(th.ID, t))
}

func (h *Handler) listRuns(w http.ResponseWriter, r *http.Request) {
	const route = "list_runs"
	c, th, ok := h.thread(w, r, route)
	if !ok {
		return
	}
	page, err := h.fd.ListTurns(r.Context(), c.cred, th.ID, turnPage, "")
	var p *frontdoor.Problem
	if err != nil && (!errors.As(err, &p) || p.Status != http.StatusNotFound) {
		h.relay(w, r, route, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.StoreTimeout)
	deleted, err := h.threads.DeletedRuns(ctx, c.tenant, th.ID)
	cancel()
	if err != nil {
		h.log.WarnContext(r.Context(), "read deleted runs failed", "session_id", th.ID, "err", err)
		h.refuse(w, route, h.storeDown("the runs cannot be read now"))
		return
	}
	out := make([]runJSON, 0, len(page.Turns))
	for _, t := range page.Turns {
		if _, gone := deleted[t.TurnID]; !gone {
			out = append(out, viewRun(th.ID, t))
		}
	}
	h.ok(route)
	httpx.WriteJSON(w, http.StatusOK, out)
}

// cancelRun answers POST /threads/{thread_id}/runs/{run_id}/cancel. action=interrupt (the
// default) cancels the run and keeps it, interrupted; action=rollback cancels it, waits for its
// end and deletes it with its effects: it is gone from the thread's runs, state and history (its
// input too). A run that succeeded before the cancel reached it has an answer the thread's next
// runs already see, so its rollback is a 409 and nothing is deleted.
func (h *Handler) cancelRun(w http.ResponseWriter, r *http.Request) {
	const route = "cancel_run"
	q := r.URL.Query()
	action := q.Get("action")
	if action != "" && action != "interrupt" && action != "rollback" {
		h.refuse(w, route, httpx.ProblemValidation.Problem("action must be interrupt or rollback"))
		return
	}
	c, th, t, ok := h.run(w, r, route)
	if !ok {
		return
	}
	runID := t.TurnID
	if !t.Status.Terminal() {
		if _, err := h.fd.CancelTurn(r.Context(), c.cred, runID); err != nil {
			h.relay(w, r, route, err)
			return
		}
	}
	if (action == "rollback" || queryTrue(r, "wait")) && !t.Status.Terminal() {
		g, err := h.fd.StreamToken(r.Context(), c.cred, th.ID)
		if err == nil {
			tracked := h.Track(nil)
			err = h.waitTerminal(r.Context(), tracked.Done(), th.ID, runID, g.StreamToken)
			tracked.Release()
		}
		if err == nil {
			t, err = h.fd.GetTurn(r.Context(), c.cred, runID)
		}
		if err != nil {
			h.relay(w, r, route, err)
			return
		}
	}
	if action == "rollback" {
		switch {
		case t.Status == wire.StatusSucceeded:
			h.refuse(w, route, httpx.ProblemThreadBusy.Problem("run "+runID+" succeeded before it could be cancelled: its answer is in the thread's state, and nothing was rolled back"))
			return
		case !t.Status.Terminal():
			h.refuse(w, route, httpx.ProblemThreadBusy.Problem("run "+runID+" has not ended yet: try the rollback again"))
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), h.cfg.StoreTimeout)
		err := h.threads.DeleteRun(ctx, c.tenant, th.ID, runID, true)
		cancel()
		if err != nil {
			h.log.WarnContext(r.Context(), "roll back run failed", "session_id", th.ID, "turn_id", runID, "err", err)
			h.refuse(w, route, h.storeDown("the run cannot be rolled back now"))
			return
		}
		h.log.InfoContext(r.Context(), "run rolled back", "session_id", th.ID, "turn_id", runID)
	}
	h.ok(route)
	w.WriteHeader(http.StatusAccepted)
}

// run authenticates and loads the path's thread and run (a turn of the thread's session).
func (h *Handler) run(w http.ResponseWriter, r *http.Request, route string) (caller, threads.Thread, frontdoor.Turn, bool) {
	c, th, ok := h.thread(w, r, route)
	if !ok {
		return caller{}, threads.Thread{}, frontdoor.Turn{}, false
	}
	t, err := h.fd.GetTurn(r.Context(), c.cred, chi.URLParam(r, "run_id"))
	if err != nil {
		h.relay(w, r, route, err)
		return caller{}, threads.Thread{}, frontdoor.Turn{}, false
	}
	if t.SessionID != th.ID {
		h.refuse(w, route, httpx.ProblemTurnNotFound.Problem("no run "+chi.URLParam(r, "run_id")+" on thread "+th.ID))
		return caller{}, threads.Thread{}, frontdoor.Turn{}, false
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.StoreTimeout)
	deleted, err := h.threads.DeletedRuns(ctx, c.tenant, th.ID)
	cancel()
	if err != nil {
		h.log.WarnContext(r.Context(), "read deleted runs failed", "session_id", th.ID, "err", err)
		h.refuse(w, route, h.storeDown("the run cannot be read now"))
		return caller{}, threads.Thread{}, frontdoor.Turn{}, false
	}
	if _, gone := deleted[t.TurnID]; gone {
		h.refuse(w, route, httpx.ProblemTurnNotFound.Problem("run "+t.TurnID+" was deleted"))
		return caller{}, threads.Thread{}, frontdoor.Turn{}, false
	}
	return c, th, t, true
}
