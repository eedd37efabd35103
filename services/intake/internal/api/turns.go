package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"

	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/pkg/kafka"
	"github.com/turnstile-run/turnstile/pkg/telemetry"
	"github.com/turnstile-run/turnstile/pkg/turnstore"
	"github.com/turnstile-run/turnstile/pkg/wire"
	"github.com/turnstile-run/turnstile/services/intake/internal/announce"
	"github.com/turnstile-run/turnstile/services/intake/internal/record"
)

// Accepted is the 202 body. It depends only on the turn's identity (and the stream token recorded
// with the idempotency key), so every retry of an idempotent request gets the same bytes.
type Accepted struct {
	TurnID      string `json:"turn_id"`
	SessionID   string `json:"session_id"`
	Status      string `json:"status"`
	StreamURL   string `json:"stream_url"`
	StreamToken string `json:"stream_token"`
}

func (h *Handler) postTurn(w http.ResponseWriter, r *http.Request) {
	const route = "post_turn"
	tenant, keyID := tenantOf(r), apiKeyOf(r)
	sessionID, bad := httpx.SessionID(r)
	if bad != nil {
		h.refuse(w, route, *bad)
		return
	}
	if !acceptableContentType(r.Header.Get("Content-Type")) {
		h.refuse(w, route, httpx.ProblemUnsupportedType.Problem("the body must be application/json"))
		return
	}
	raw, req, bad := readTurn(httpx.LimitBody(w, r, h.cfg.MaxBody))
	if bad == nil {
		bad = checkWebhook(req, h.cfg.WebhookAllowHTTP)
	}
	if bad != nil {
		h.refuse(w, route, *bad)
		return
	}
	agent, found := h.agents().Get(req.Agent)
	if !found {
		h.refuse(w, route, httpx.ProblemAgentNotFound.Problem(fmt.Sprintf("no agent named %q (GET /v1/agents lists them)", req.Agent)))
		return
	}
	trace.SpanFromContext(r.Context()).SetAttributes(telemetry.AgentAttribute(agent.Name))
	now := h.now()
	deadline, err := h.deadline(r, req, now, agent.Limits.DefaultDeadline)
	if err != nil {
		h.refuse(w, route, httpx.ProblemInvalidDeadline.Problem(err.Error()))
		return
	}
	turnID, idemKey, err := h.turnID(r, req, tenant, sessionID)
	if err != nil {
		h.refuse(w, route, httpx.ProblemInvalidTurnID.Problem(err.Error()))
		return
	}
	ctx := r.Context()

	// Admission, cheapest first: local signals, then Redis, then Postgres. Nothing is written
	// before the quotas admitted the request.
	if age, ok := h.backlogAge(agent.Name); ok {
		if age > h.cfg.MaxBacklogAge {
			h.refuse(w, route, httpx.ProblemBacklog.Problem(fmt.Sprintf("the backlog is %s old, over the limit of %s", age.Round(time.Millisecond), h.cfg.MaxBacklogAge)))
			return
		}
		if deadline.Sub(now) < age+h.cfg.MinUsefulTime {
			h.refuse(w, route, httpx.ProblemDeadlineUnreach.Problem(fmt.Sprintf("the deadline cannot be met: turns wait about %s before they start", age.Round(time.Millisecond))))
			return
		}
	}
	// The session is the tenant's by its key (wire.SessionKey): a session ID another tenant uses
	// names that tenant's own session, so no lookup stands between a turn and its acceptance.
	key := wire.NewSessionKey(tenant, sessionID)
	if out, reset := h.budgetExhausted(tenant, now); out {
		p := httpx.ProblemBudgetExhausted.Problem(fmt.Sprintf("tenant %s has spent its token budget until %s", tenant, reset.Format(time.RFC3339)))
		p.RetryAfter = reset.Sub(now)
		h.refuse(w, route, p)
		return
	}
	if retry, ok := h.allowRate(ctx, tenant, ""); !ok {
		rate, _ := h.rateOf(tenant)
		p := httpx.ProblemRateLimited.Problem(fmt.Sprintf("tenant %s is over its rate of %d turns per second", tenant, rate))
		p.RetryAfter = retry
		h.refuse(w, route, p)
		return
	}
	if rate, set := h.agentRate(tenant, agent.Name); set {
		if retry, ok := h.allowRate(ctx, tenant, agent.Name); !ok {
			p := httpx.ProblemRateLimited.Problem(fmt.Sprintf("tenant %s is over its rate of %d turns per second for agent %s", tenant, rate, agent.Name))
			p.RetryAfter = retry
			h.refuse(w, route, p)
			return
		}
	}
	if n, ok := h.queuedTurns(ctx, tenant); ok && n >= h.cfg.MaxQueuedTurns {
		p := httpx.ProblemQueueQuota.Problem(fmt.Sprintf("tenant %s has %d queued turns, its maximum is %d", tenant, n, h.cfg.MaxQueuedTurns))
		p.RetryAfter = h.cfg.RetryAfter
		h.refuse(w, route, p)
		return
	}
	if req.Multitask == "reject" {
		if busy, err := h.sessionBusy(ctx, key, turnID); err != nil {
			h.failOpen.WithLabelValues("multitask_reject").Inc()
		} else if busy {
			h.refuse(w, route, httpx.ProblemSessionBusy.Problem("the session has a queued or running turn and multitask is reject"))
			return
		}
	}
	token, reused := h.idempotency(ctx, idemKey, keyID, tenant, sessionID, raw)
	if reused {
		h.refuse(w, route, httpx.ProblemIdempotencyReuse.Problem("this idempotency key (or turn_id) was used with a different request body"))
		return
	}

	env := wire.Envelope{
		TurnID: turnID, SessionID: sessionID, Tenant: tenant, Input: *req.Input,
		Metadata: req.Metadata, Multitask: req.Multitask, Deadline: deadline, AcceptedAt: now,
		Region: h.cfg.Region.Code, Webhook: envelopeWebhook(req), PushConfigs: envelopePushConfigs(req.PushConfigs),
		Agent: agent.Name, Priority: req.Priority,
	}
	if req.TurnID != "" {
		env.ClientTurnID, _ = h.parseTurnID(req.TurnID) // turnID parsed it
	}
	shownID := env.ShownTurnID()
	value, err := env.Encode()
	if err != nil {
		h.refuse(w, route, httpx.ProblemValidation.Problem("metadata cannot be encoded: "+err.Error()))
		return
	}
	// Read before the record is produced, so the ID recorded with the row names the topic the
	// record went to or an older incarnation of it, never a newer one (package redrive).
	topic := h.agents().Topic(h.cfg.Topic, agent.Name)
	var topicID uuid.UUID
	if h.d.TopicID != nil {
		topicID = h.d.TopicID(topic)
	}
	rec := &kgo.Record{Topic: topic, Key: []byte(key.String()), Value: value, Headers: priorityHeaders(env)}
	err = h.ensureTopic(ctx, topic)
	if err == nil {
		err = h.produceRecord(ctx, rec)
	}
	if err != nil {
		h.d.Log.WarnContext(ctx, "produce failed", "session_id", sessionID, "turn_id", turnID, "err", err)
		h.refuse(w, route, httpx.ProblemKafkaUnavail.Problem("the turn could not be durably queued in time; retry with the same Idempotency-Key"))
		return
	}
	h.recordQueued(ctx, env, rec, topicID)
	if req.Multitask == "interrupt" {
		h.interrupt(ctx, key, turnID, now)
	}
	h.postAccepted.Inc()
	h.accepted.WithLabelValues(agent.Name).Inc()
	if token == "" {
		token = h.d.Signer.SignKey(keyID, tenant, sessionID)
	}
	w.Header().Set("Location", "/v1/turns/"+shownID)
	httpx.WriteJSON(w, http.StatusAccepted, Accepted{
		TurnID:      shownID,
		SessionID:   sessionID,
		Status:      string(wire.StatusQueued),
		StreamURL:   "/v1/sessions/" + url.PathEscape(sessionID) + "/events?turn_id=" + shownID,
		StreamToken: token,
	})
}

// produceRecord waits for Kafka's acknowledgement at most ProduceTimeout. A record still in flight
// when the wait ends may yet be written: the client was told 503 and retries with the same key, and
// the worker's claim makes the duplicate harmless.
func (h *Handler) produceRecord(ctx context.Context, rec *kgo.Record) error {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.ProduceTimeout)
	defer cancel()
	start := time.Now()
	telemetry.InjectRecord(ctx, rec)
	err := h.produceOnce(ctx, rec)
	if p, ok := h.d.Producer.(purger); ok && kafka.NewIncarnation(err) {
		// The topic was deleted and recreated (or the embedded broker restarted): the client
		// refuses the new incarnation until the topic is purged from it, then produces to it.
		p.PurgeTopicsFromProducing(rec.Topic)
		again := &kgo.Record{Topic: rec.Topic, Key: rec.Key, Value: rec.Value, Headers: rec.Headers, Context: rec.Context}
		if err = h.produceOnce(ctx, again); err == nil {
			// The caller records where the record went. Only once its promise ran: after a
			// timeout the client may still be writing the record's offset and partition.
			*rec = *again
		}
	}
	if err != nil {
		return err
	}
	h.produce.Observe(time.Since(start).Seconds())
	return nil
}

// purger is the part of a Kafka client that forgets a topic's incarnation (kgo.Client has it).
type purger interface {
	PurgeTopicsFromProducing(topics ...string)
}

// produceOnce produces rec and waits for its acknowledgement until ctx ends.
func (h *Handler) produceOnce(ctx context.Context, rec *kgo.Record) error {
	done := make(chan error, 1)
	h.d.Producer.Produce(ctx, rec, func(_ *kgo.Record, err error) { done <- err })
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("produce turn: %w", err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("produce turn: no acknowledgement: %w", context.Cause(ctx))
	}
}

// recordQueued hands the turn's queued row to the recorder, under the session's key: everything
// its record rec holds, and where Kafka put it (in the topic whose ID was topicID before the
// produce).
//
// With several agents in the catalog the answer waits for the row (record.Recorder.Record, at most
// record.WriteTimeout): a session's turns may go to different agents, whose records are consumed
// by different lanes, and a later turn's claim keeps the session's order only against the rows it
// can see (invariant 16). With one agent every turn of a session is in one partition of one topic,
// whose consumer keeps their order, so the row is written off the request path as before.
func (h *Handler) recordQueued(ctx context.Context, env wire.Envelope, rec *kgo.Record, topicID uuid.UUID) {
	if h.d.Recorder == nil {
		return
	}
	row := record.Row{
		TurnID: env.TurnID, ClientTurnID: env.ClientTurnID, Session: env.SessionKey(), Tenant: env.Tenant,
		AcceptedAt: env.AcceptedAt, Deadline: env.Deadline,
		Input: env.Input.Text, Metadata: env.Metadata, Multitask: env.Multitask,
		Webhook: env.Webhook, PushConfigs: env.PushConfigs,
		Partition: rec.Partition, Offset: rec.Offset, TopicID: topicID, Agent: env.Agent,
		Priority: env.PriorityOf(),
	}
	for _, hd := range rec.Headers {
		if hd.Key == "traceparent" {
			row.Traceparent = string(hd.Value)
		}
	}
	if len(h.agents().Names()) < 2 {
		h.d.Recorder.Add(row)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), record.WriteTimeout)
	defer cancel()
	if res := h.d.Recorder.Record(ctx, row); res != record.WaitWritten {
		h.d.Log.WarnContext(ctx, "queued row not confirmed before the answer; the session's order across agents rests on its later write",
			"session_id", env.SessionID, "turn_id", env.TurnID, "result", res)
	}
}

// interrupt requests cancellation of every live turn the session (named by its key) accepted before this one, so this
// turn runs next: the running turn's worker sees the request at its next lease renewal, and queued
// ones end as cancelled at their claim.
func (h *Handler) interrupt(ctx context.Context, session wire.SessionKey, turnID uuid.UUID, acceptedAt time.Time) {
	if h.store == nil {
		h.failOpen.WithLabelValues("multitask_interrupt").Inc()
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.cfg.StatusTimeout)
	defer cancel()
	if h.d.Recorder != nil {
		h.d.Recorder.Flush(ctx)
	}
	n, ended, err := h.store.CancelEarlier(ctx, session, turnID, acceptedAt)
	if err != nil {
		h.failOpen.WithLabelValues("multitask_interrupt").Inc()
		h.d.Log.WarnContext(ctx, "interrupt: cancel of earlier turns failed", "session_id", session.SessionID(), "err", err)
		return
	}
	announce.Ended(ctx, h.d.Events, h.d.Log, h.cfg.Region.Code, wire.StatusCancelled, ended)
	h.d.Log.DebugContext(ctx, "interrupt: cancel requested", "session_id", session.SessionID(), "turns", n)
}

// turnView is a turn as the API shows it: its ID is the one the client knows, prefixed by this
// region (the stored turn's TurnID is the bare UUID).
type turnView = turnstore.Shown

func (h *Handler) getTurn(w http.ResponseWriter, r *http.Request) {
	const route = "get_turn"
	t, ok := h.loadTurn(w, r, route)
	if !ok {
		return
	}
	h.requests.WithLabelValues(route, "ok").Inc()
	httpx.WriteJSON(w, http.StatusOK, h.shown(t))
}

// shown is a turn as its client sees it: stored under the session's key and, when the client
// minted its ID, under an ID derived from it; shown with the client's own session ID and turn ID.
func (h *Handler) shown(t turnstore.Turn) turnView {
	id := t.TurnID
	if t.ClientTurnID != nil {
		id = *t.ClientTurnID
	}
	return turnView{Turn: t, TurnID: h.showTurnID(id)}
}

// loadTurn loads the path's turn for the request's tenant, answering the refusal itself when it
// cannot. A turn intake accepted moments ago may still sit in this replica's queued-row buffer, so a
// miss flushes it and reads again.
func (h *Handler) loadTurn(w http.ResponseWriter, r *http.Request, route string) (turnstore.Turn, bool) {
	id, ok := h.parseTurnID(chi.URLParam(r, "turn_id"))
	if !ok {
		h.refuse(w, route, httpx.ProblemInvalidTurnID.Problem(h.turnIDShape()))
		return turnstore.Turn{}, false
	}
	if h.store == nil {
		h.refuse(w, route, httpx.ProblemStoreUnavail.Problem("turn status is unavailable"))
		return turnstore.Turn{}, false
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.StatusTimeout)
	defer cancel()
	t, err := h.getOwn(ctx, id, tenantOf(r))
	if errors.Is(err, turnstore.ErrNotFound) && h.d.Recorder != nil {
		h.d.Recorder.Flush(ctx)
		t, err = h.getOwn(ctx, id, tenantOf(r))
	}
	switch {
	case errors.Is(err, turnstore.ErrNotFound) || (err == nil && t.Tenant != tenantOf(r)):
		h.refuse(w, route, httpx.ProblemTurnNotFound.Problem("no such turn"))
		return turnstore.Turn{}, false
	case err != nil:
		h.d.Log.WarnContext(r.Context(), "read turn failed", "turn_id", id, "err", err)
		h.refuse(w, route, httpx.ProblemStoreUnavail.Problem("turn status is temporarily unavailable"))
		return turnstore.Turn{}, false
	}
	return t, true
}

// getOwn reads the tenant's turn that the client calls id: the one stored under the ID derived
// from id when the client minted it (wire.ClientTurnKey), else the one stored under id itself.
func (h *Handler) getOwn(ctx context.Context, id uuid.UUID, tenant string) (turnstore.Turn, error) {
	t, err := h.store.Get(ctx, wire.ClientTurnKey(tenant, id))
	if errors.Is(err, turnstore.ErrNotFound) {
		t, err = h.store.Get(ctx, id)
	}
	return t, err
}

// CancelAccepted is the 202 body of a cancel.
type CancelAccepted struct {
	TurnID          string `json:"turn_id"`
	Status          string `json:"status"`
	CancelRequested bool   `json:"cancel_requested"`
}

// cancelTurn requests cancellation. It is never refused for capacity; it is idempotent, and on a
// finished turn it changes nothing and reports the final status.
func (h *Handler) cancelTurn(w http.ResponseWriter, r *http.Request) {
	const route = "cancel_turn"
	t, ok := h.loadTurn(w, r, route)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.StatusTimeout)
	defer cancel()
	c, err := h.store.RequestCancel(ctx, t.TurnID, t.Session, t.Tenant)
	if err != nil {
		h.d.Log.WarnContext(r.Context(), "cancel failed", "turn_id", t.TurnID, "err", err)
		h.refuse(w, route, httpx.ProblemStoreUnavail.Problem("the cancel request could not be recorded; retry"))
		return
	}
	live := c.Live
	if c.Ended {
		// A queued turn's cancel is terminal at once: nothing waits for a worker to read its
		// record, which may have been lost.
		announce.Ended(ctx, h.d.Events, h.d.Log, h.cfg.Region.Code, wire.StatusCancelled, []turnstore.Ended{{
			TurnID: t.TurnID, Session: t.Session, ClientTurnID: t.ClientTurnID, Token: c.Token,
			Attempt: c.Attempt, Error: turnstore.CancelledBeforeStart,
		}})
	}
	if live {
		if t2, err := h.store.Get(ctx, t.TurnID); err == nil {
			t = t2
		}
	}
	h.requests.WithLabelValues(route, "accepted").Inc()
	httpx.WriteJSON(w, http.StatusAccepted, CancelAccepted{
		TurnID: h.shown(t).TurnID, Status: string(t.Status),
		CancelRequested: live || t.CancelReq,
	})
}

// TurnPage is a page of a session's turns, newest first.
type TurnPage struct {
	Turns      []turnView `json:"turns"`
	NextCursor string     `json:"next_cursor,omitempty"`
}

func (h *Handler) listTurns(w http.ResponseWriter, r *http.Request) {
	const route = "list_turns"
	sessionID, bad := httpx.SessionID(r)
	if bad != nil {
		h.refuse(w, route, *bad)
		return
	}
	limit := PageSizeDefault
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > PageSizeMax {
			h.refuse(w, route, httpx.ProblemValidation.Problem(fmt.Sprintf("limit must be an integer from 1 to %d", PageSizeMax)))
			return
		}
		limit = n
	}
	var before time.Time
	if v := r.URL.Query().Get("cursor"); v != "" {
		us, err := strconv.ParseInt(v, 36, 64)
		if err != nil || us <= 0 {
			h.refuse(w, route, httpx.ProblemInvalidCursor.Problem("cursor must be a next_cursor this API returned"))
			return
		}
		before = time.UnixMicro(us)
	}
	if h.store == nil {
		h.refuse(w, route, httpx.ProblemStoreUnavail.Problem("turn status is unavailable"))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.StatusTimeout)
	defer cancel()
	if h.d.Recorder != nil {
		h.d.Recorder.Flush(ctx)
	}
	turns, err := h.store.ListSession(ctx, wire.NewSessionKey(tenantOf(r), sessionID), before, limit)
	if err != nil {
		h.d.Log.WarnContext(r.Context(), "list turns failed", "session_id", sessionID, "err", err)
		h.refuse(w, route, httpx.ProblemStoreUnavail.Problem("turn status is temporarily unavailable"))
		return
	}
	if len(turns) == 0 && before.IsZero() {
		// A session is known by its turns: the tenant never used this session ID.
		h.refuse(w, route, httpx.ProblemSessionNotFound.Problem("no such session"))
		return
	}
	page := TurnPage{Turns: make([]turnView, len(turns))}
	for i, t := range turns {
		page.Turns[i] = h.shown(t)
	}
	if len(turns) == limit {
		page.NextCursor = strconv.FormatInt(turns[len(turns)-1].AcceptedAt.UnixMicro(), 36)
	}
	h.requests.WithLabelValues(route, "ok").Inc()
	httpx.WriteJSON(w, http.StatusOK, page)
}

// whoami answers whom the request's API key names: its tenant ("default" with auth off). A
// front door asks it to authenticate a request before reading anything of it.
func (h *Handler) whoami(w http.ResponseWriter, r *http.Request) {
	h.requests.WithLabelValues("whoami", "ok").Inc()
	httpx.WriteJSON(w, http.StatusOK, map[string]string{"tenant": tenantOf(r)})
}

// Submit produces env's record to its agent's topic and records its queued row as postTurn does
// for an accepted turn (the region and the record's key are filled in here), without the admission checks of a
// client's post: an operator's replay is not its tenant's load. A record produced twice for one
// turn ID (a replay retried) runs once: the worker's claim makes the duplicate harmless.
func (h *Handler) Submit(ctx context.Context, env wire.Envelope) error {
	env.Region = h.cfg.Region.Code
	value, err := env.Encode()
	if err != nil {
		return fmt.Errorf("encode turn: %w", err)
	}
	topic := h.agents().Topic(h.cfg.Topic, env.Agent)
	var topicID uuid.UUID
	if h.d.TopicID != nil {
		topicID = h.d.TopicID(topic)
	}
	rec := &kgo.Record{Topic: topic, Key: []byte(env.SessionKey().String()), Value: value, Headers: priorityHeaders(env)}
	err = h.ensureTopic(ctx, topic)
	if err == nil {
		err = h.produceRecord(ctx, rec)
	}
	if err != nil {
		return err
	}
	h.recordQueued(ctx, env, rec, topicID)
	return nil
}

// Agent is the name of the catalog's agent name names (the default agent for ""), and whether
// the catalog has it.
func (h *Handler) Agent(name string) (string, bool) {
	a, ok := h.agents().Get(name)
	return a.Name, ok
}

// FlushQueued writes the queued rows of the turns accepted or submitted so far (see
// record.Recorder.Flush).
func (h *Handler) FlushQueued(ctx context.Context) {
	if h.d.Recorder != nil {
		h.d.Recorder.Flush(ctx)
	}
}

// priorityHeaders are the record headers that carry env's priority to the worker's scheduler
// (wire.PriorityHeader), none for the default priority.
func priorityHeaders(env wire.Envelope) []kgo.RecordHeader {
	if env.Priority == nil || *env.Priority == wire.PriorityDefault {
		return nil
	}
	return []kgo.RecordHeader{{Key: wire.PriorityHeader, Value: []byte(strconv.Itoa(*env.Priority))}}
}
