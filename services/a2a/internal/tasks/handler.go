package tasks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"

	"github.com/turnstile-run/turnstile/pkg/a2atask"
	"github.com/turnstile-run/turnstile/pkg/frontdoor"
	"github.com/turnstile-run/turnstile/pkg/lifecycle"
	"github.com/turnstile-run/turnstile/pkg/region"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

// Defaults of Config.
const (
	// MaxBlockDefault bounds a blocking message/send (config.A2AMaxBlockDefault).
	MaxBlockDefault = 60 * time.Second
	// CancelWaitDefault bounds how long tasks/cancel follows a running turn to its end.
	CancelWaitDefault = 5 * time.Second
	// TurnsPageDefault is how many of a session's newest turns are read to find a task's turns.
	TurnsPageDefault = 100
)

// Config configures the handler.
type Config struct {
	// MaxBlock bounds a blocking message/send. Defaults to MaxBlockDefault.
	MaxBlock time.Duration
	// CancelWait bounds how long tasks/cancel waits for a running turn to end. Defaults to
	// CancelWaitDefault.
	CancelWait time.Duration
	// TurnsPage is how many of a session's newest turns are read to find a task's later turns.
	// Defaults to TurnsPageDefault.
	TurnsPage int
	// Region is this region's code (TURNSTILE_REGION): derived context IDs carry it, as task IDs
	// (turn IDs) do. Empty in single-region mode.
	Region string
}

// Handler is the A2A request handler over the native API. It keeps no task state: everything it
// answers comes from the native API, so any replica answers any request.
type Handler struct {
	fd  *frontdoor.Client
	cfg Config
	log *slog.Logger

	// Streams tracks the open streams (message/stream, tasks/resubscribe): Drain ends them at
	// their next event, and new ones at once; clients resubscribe with their last event id.
	lifecycle.Streams
}

var _ a2asrv.RequestHandler = (*Handler)(nil)

// New returns a handler calling the native API through fd.
func New(fd *frontdoor.Client, cfg Config, log *slog.Logger) *Handler {
	if cfg.MaxBlock <= 0 {
		cfg.MaxBlock = MaxBlockDefault
	}
	if cfg.CancelWait <= 0 {
		cfg.CancelWait = CancelWaitDefault
	}
	if cfg.TurnsPage <= 0 {
		cfg.TurnsPage = TurnsPageDefault
	}
	return &Handler{fd: fd, cfg: cfg, log: log}
}

// OnGetTask answers tasks/get.
func (h *Handler) OnGetTask(ctx context.Context, q *a2a.TaskQueryParams) (*a2a.Task, error) {
	call := callFrom(ctx)
	if q.HistoryLength != nil && *q.HistoryLength < 0 {
		return nil, call.fail(fmt.Errorf("historyLength must not be negative: %w", a2a.ErrInvalidParams))
	}
	turns, err := h.taskTurns(ctx, call, string(q.ID))
	if err != nil {
		return nil, err
	}
	return a2atask.Build(turns, q.HistoryLength), nil
}

// OnCancelTask answers tasks/cancel: it cancels the task's current turn and waits, within
// CancelWait, for it to end.
func (h *Handler) OnCancelTask(ctx context.Context, id *a2a.TaskIDParams) (*a2a.Task, error) {
	call := callFrom(ctx)
	turns, err := h.taskTurns(ctx, call, string(id.ID))
	if err != nil {
		return nil, err
	}
	last := turns[len(turns)-1]
	if st := a2atask.Status(id.ID, last).State; a2atask.Ended(st) {
		return nil, call.fail(fmt.Errorf("task is %s: %w", st, a2a.ErrTaskNotCancelable))
	}
	ca, err := h.fd.CancelTurn(ctx, call.Credential, last.TurnID)
	if err != nil {
		return nil, call.native(err, a2a.ErrTaskNotFound)
	}
	if !wire.Status(ca.Status).Terminal() {
		h.awaitEnd(ctx, call, last)
	}
	if turns, err = h.taskTurns(ctx, call, string(id.ID)); err != nil {
		return nil, err
	}
	return a2atask.Build(turns, nil), nil
}

// awaitEnd follows a turn's stream until its terminal event, at most CancelWait.
func (h *Handler) awaitEnd(ctx context.Context, call *Call, t frontdoor.Turn) {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.CancelWait)
	defer cancel()
	grant, err := h.fd.StreamToken(ctx, call.Credential, t.SessionID)
	if err != nil {
		return
	}
	s, err := h.fd.OpenStream(ctx, frontdoor.StreamRequest{SessionID: t.SessionID, Token: grant.StreamToken, TurnID: t.TurnID})
	if err != nil {
		return
	}
	defer func() { _ = s.Close() }()
	for {
		ev, err := s.Next()
		if err != nil || ev.Type.Terminal() {
			return
		}
	}
}

// submission is a message accepted as a turn of its task.
type submission struct {
	task      a2a.TaskID
	contextID string
	turnID    string
	token     string
	message   *a2a.Message
	// prior are the task's turns before this one (a follow-up's), oldest first.
	prior []frontdoor.Turn
}

// snapshot is the task as the submission and the events rendered so far leave it.
func (s *submission) snapshot(r *renderer) *a2a.Task {
	task := &a2a.Task{ID: s.task, ContextID: s.contextID}
	if len(s.prior) > 0 {
		task = a2atask.Build(s.prior, nil)
	}
	msg := *s.message
	msg.TaskID, msg.ContextID = s.task, s.contextID
	task.History = append(task.History, &msg)
	task.Status = a2a.TaskStatus{State: r.state}
	if r.final != nil {
		task.Status = *r.final
	}
	if text := r.text.String(); text != "" {
		task.Artifacts = append(task.Artifacts, &a2a.Artifact{ID: a2atask.ArtifactID(s.turnID), Name: "response", Parts: a2a.ContentParts{a2a.TextPart{Text: text}}})
		if r.final != nil && r.state == a2a.TaskStateCompleted {
			task.History = append(task.History, a2atask.AgentMessage(s.task, s.contextID, "agent-"+s.turnID, text))
		}
	}
	return task
}

// OnSendMessage answers message/send: at once with the submitted task, or, when blocking, with the
// task as its stream leaves it when it ends, waits for the user, or MaxBlock passes.
func (h *Handler) OnSendMessage(ctx context.Context, p *a2a.MessageSendParams) (a2a.SendMessageResult, error) {
	call := callFrom(ctx)
	sub, err := h.submit(ctx, call, p)
	if err != nil {
		return nil, err
	}
	r := newRenderer(sub.task, sub.contextID, sub.turnID)
	if p.Config != nil && p.Config.Blocking != nil && !*p.Config.Blocking {
		return sub.snapshot(r), nil
	}
	bctx, cancel := context.WithTimeout(ctx, h.cfg.MaxBlock)
	defer cancel()
	if err := h.follow(bctx, call, sub.contextID, sub.token, r, cursor{k: -1}, nil, func(a2a.Event, error) bool { return true }); err != nil {
		// The task is durable whatever the stream did: answer it as far as the stream got.
		h.log.LogAttrs(ctx, slog.LevelWarn, "a2a blocking send answered early", slog.String("task_id", string(sub.task)),
			slog.String("session_id", sub.contextID), slog.String("err", err.Error()))
		call.clearOutcome()
	}
	return sub.snapshot(r), nil
}

// OnSendMessageStream answers message/stream: the submitted task, then its turn's events.
func (h *Handler) OnSendMessageStream(ctx context.Context, p *a2a.MessageSendParams) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		call := callFrom(ctx)
		sub, err := h.submit(ctx, call, p)
		if err != nil {
			call.tag("")
			yield(nil, err)
			return
		}
		r := newRenderer(sub.task, sub.contextID, sub.turnID)
		first := func() bool {
			call.tag(startID)
			return yield(sub.snapshot(r), nil)
		}
		if err := h.follow(ctx, call, sub.contextID, sub.token, r, cursor{k: -1}, first, yield); err != nil {
			call.tag("")
			yield(nil, err)
		}
	}
}

// OnResubscribeToTask answers tasks/resubscribe: after the call's Last-Event-ID exactly, or, without
// one, the task's snapshot and its current turn's events from the start.
func (h *Handler) OnResubscribeToTask(ctx context.Context, id *a2a.TaskIDParams) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		call := callFrom(ctx)
		err := h.resubscribe(ctx, call, id.ID, yield)
		if err != nil {
			call.tag("")
			yield(nil, err)
		}
	}
}

func (h *Handler) resubscribe(ctx context.Context, call *Call, id a2a.TaskID, yield func(a2a.Event, error) bool) error {
	cur, err := parseCursor(call.LastEventID)
	if err != nil {
		return call.fail(fmt.Errorf("%w: %w", err, a2a.ErrInvalidParams))
	}
	turns, err := h.taskTurns(ctx, call, string(id))
	if err != nil {
		return err
	}
	last := turns[len(turns)-1]
	state := a2atask.Status(id, last).State
	var first func() bool
	if call.LastEventID == "" {
		if state.Terminal() {
			return call.fail(fmt.Errorf("task is %s: nothing more will stream: %w", state, a2a.ErrUnsupportedOperation))
		}
		snapshot := a2atask.Build(turns, nil)
		if a2atask.Interrupted(state) {
			call.tag(startID)
			yield(snapshot, nil)
			return nil
		}
		first = func() bool {
			call.tag(startID)
			return yield(snapshot, nil)
		}
	}
	grant, err := h.fd.StreamToken(ctx, call.Credential, last.SessionID)
	if err != nil {
		return call.native(err, a2a.ErrTaskNotFound)
	}
	return h.follow(ctx, call, last.SessionID, grant.StreamToken, newRenderer(id, last.SessionID, last.TurnID), cur, first, yield)
}

// follow relays the renderer's turn's native stream from cur until the task's stream ends, the
// client leaves or the replica drains. A cursor within one native event (k ≥ 0) replays the turn
// from its start and skips up to it. first, if set, yields what goes before the turn's events (the
// task's snapshot) once the native stream is open: a stream the process's caps refuse
// (pkg/admission) is answered before anything was written, so it can still be an HTTP 503 or 429.
func (h *Handler) follow(ctx context.Context, call *Call, sessionID, token string, r *renderer, cur cursor, first func() bool, yield func(a2a.Event, error) bool) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The replica's drain also ends the stream; ctx still bounds it.
	tracked := h.Track(cancel)
	defer tracked.Release()

	req := frontdoor.StreamRequest{SessionID: sessionID, Token: token, TurnID: r.turnID}
	skipping := cur.native != "" && cur.k >= 0
	if cur.native != "" && !skipping {
		req.LastEventID = cur.native
	}
	s, err := h.fd.OpenStream(ctx, req)
	if err != nil {
		if ctx.Err() != nil || over(err) {
			return nil
		}
		return call.native(err, a2a.ErrTaskNotFound)
	}
	defer func() { _ = s.Close() }()
	call.ready()
	if first != nil && !first() {
		return nil
	}
	for {
		ev, err := s.Next()
		switch {
		case errors.Is(err, io.EOF):
			if skipping {
				return call.fail(errStreamLost)
			}
			return nil
		case err != nil:
			if ctx.Err() != nil || over(err) {
				// The client left or the replica drains: the client resumes from its last id.
				return nil
			}
			return call.native(err, a2a.ErrTaskNotFound)
		}
		evs, done, err := r.render(ev)
		if err != nil {
			return call.fail(err)
		}
		if skipping {
			if ev.ID != cur.native {
				continue
			}
			skipping = false
			evs = evs[min(cur.k+1, len(evs)):]
		}
		for _, t := range evs {
			call.tag(t.id)
			if !yield(t.ev, nil) {
				return nil
			}
		}
		if done {
			return nil
		}
	}
}

// over reports whether the gateway answered that the followed turn has nothing after the cursor
// (204: the cursor is at or after its terminal event).
func over(err error) bool {
	var p *frontdoor.Problem
	return errors.As(err, &p) && p.Status == http.StatusNoContent
}

// submit validates a message and accepts it as a turn: its task's first, or the next turn of the
// input-required task it names.
func (h *Handler) submit(ctx context.Context, call *Call, p *a2a.MessageSendParams) (*submission, error) {
	m := p.Message
	if m == nil || m.ID == "" || len(m.Parts) == 0 {
		return nil, call.fail(fmt.Errorf("message with messageId and parts is required: %w", a2a.ErrInvalidParams))
	}
	if m.Role != a2a.MessageRoleUser {
		return nil, call.fail(fmt.Errorf("message role must be user: %w", a2a.ErrInvalidParams))
	}
	text, ok := messageText(m)
	if !ok {
		return nil, call.fail(fmt.Errorf("only text parts are accepted: %w", a2a.ErrUnsupportedContentType))
	}
	if strings.TrimSpace(text) == "" {
		return nil, call.fail(fmt.Errorf("message text is empty: %w", a2a.ErrInvalidParams))
	}
	if p.Config != nil {
		if !acceptsText(p.Config.AcceptedOutputModes) {
			return nil, call.fail(fmt.Errorf("this agent answers in text/plain: %w", a2a.ErrUnsupportedContentType))
		}
	}
	sub := &submission{message: m, contextID: m.ContextID, task: m.TaskID}
	link := map[string]any{"message_id": m.ID}
	if m.TaskID != "" {
		turns, err := h.taskTurns(ctx, call, string(m.TaskID))
		if err != nil {
			return nil, err
		}
		if sub.contextID != "" && sub.contextID != turns[0].SessionID {
			return nil, call.fail(fmt.Errorf("contextId is not the task's context: %w", a2a.ErrInvalidParams))
		}
		sub.contextID = turns[0].SessionID
		last := turns[len(turns)-1]
		if len(turns) > 1 && a2atask.LinkOf(last).MessageID == m.ID {
			// A retry of a follow-up the worker already claimed: the same turn, not a new one.
			grant, err := h.fd.StreamToken(ctx, call.Credential, sub.contextID)
			if err != nil {
				return nil, call.native(err, a2a.ErrTaskNotFound)
			}
			sub.prior, sub.turnID, sub.token = turns[:len(turns)-1], last.TurnID, grant.StreamToken
			return sub, nil
		}
		if st := a2atask.Status(m.TaskID, last).State; !a2atask.Interrupted(st) {
			// A turn's end is announced as the task's end the moment it happens (its stream's final
			// event, its push notifications), and A2A keeps a terminal task terminal: a message
			// queued behind a working turn would reopen a task already announced completed, or race
			// its completion. The context's next task gives the same queueing without that.
			return nil, call.fail(fmt.Errorf("task is %s: only a task waiting for input (input-required, auth-required) takes another message; "+
				"send it without taskId in contextId %q to run it as the context's next task, after this one: %w", st, turns[0].SessionID, a2a.ErrUnsupportedOperation))
		}
		sub.prior = turns
		// The task's ID as its first turn shows it, whichever form (bare or prefixed) the client sent.
		sub.task = a2a.TaskID(turns[0].TurnID)
		link["task_id"] = turns[0].TurnID
	} else if sub.contextID == "" {
		sub.contextID = contextFor(h.cfg.Region, m.ID)
	}
	if !wire.SessionIDValid(sub.contextID) {
		return nil, call.fail(fmt.Errorf("contextId must be %s: %w", wire.SessionIDRule, a2a.ErrInvalidParams))
	}
	md := make(map[string]any, len(m.Metadata)+1)
	for k, v := range m.Metadata {
		md[k] = v
	}
	md[a2atask.MetadataKey] = link
	dl, err := frontdoor.ParseDeadline(call.Deadline)
	if err != nil {
		return nil, call.native(err, a2a.ErrTaskNotFound)
	}
	acc, err := h.fd.PostTurn(ctx, call.Credential, sub.contextID,
		frontdoor.TurnRequest{Input: wire.Input{Text: text}, Metadata: md, PushConfigs: messagePush(m, pushConfigOf(p), call.Version), Agent: call.Agent},
		frontdoor.PostOptions{IdempotencyKey: m.ID, Deadline: dl})
	if err != nil {
		return nil, call.native(err, a2a.ErrTaskNotFound)
	}
	sub.turnID, sub.token = acc.TurnID, acc.StreamToken
	if sub.task == "" {
		sub.task = a2a.TaskID(acc.TurnID)
	}
	h.log.LogAttrs(ctx, slog.LevelInfo, "a2a message accepted", slog.String("task_id", string(sub.task)),
		slog.String("turn_id", sub.turnID), slog.String("session_id", sub.contextID), slog.String("agent", call.Agent))
	return sub, nil
}

// pushConfigOf is the send's configuration.pushNotificationConfig, or nil.
func pushConfigOf(p *a2a.MessageSendParams) *a2a.PushConfig {
	if p.Config == nil {
		return nil
	}
	return p.Config.PushConfig
}

// taskTurns returns the turns of task id, oldest first: its own (first) turn and the follow-ups
// that name it among the session's newest TurnsPage turns.
func (h *Handler) taskTurns(ctx context.Context, call *Call, id string) ([]frontdoor.Turn, error) {
	if _, _, err := region.ParseUUID(id); err != nil {
		return nil, call.fail(fmt.Errorf("task %q: %w", id, a2a.ErrTaskNotFound))
	}
	first, err := h.fd.GetTurn(ctx, call.Credential, id)
	if err != nil {
		return nil, call.native(err, fmt.Errorf("task %s: %w", id, a2a.ErrTaskNotFound))
	}
	if a2atask.LinkOf(first).TaskID != "" {
		// A follow-up turn's own ID names no task.
		return nil, call.fail(fmt.Errorf("task %s: %w", id, a2a.ErrTaskNotFound))
	}
	turns := []frontdoor.Turn{first}
	if !a2atask.Interrupted(a2atask.State(first.Status, a2atask.Output(first).State)) {
		// Only a task waiting for the user ever gets another turn.
		return turns, nil
	}
	page, err := h.fd.ListTurns(ctx, call.Credential, first.SessionID, h.cfg.TurnsPage, "")
	if err != nil {
		return nil, call.native(err, fmt.Errorf("task %s: %w", id, a2a.ErrTaskNotFound))
	}
	var later []frontdoor.Turn
	for _, t := range page.Turns {
		if tid := a2atask.LinkOf(t).TaskID; tid == first.TurnID || tid == id {
			later = append(later, t)
		}
	}
	slices.Reverse(later)
	return append(turns, later...), nil
}
