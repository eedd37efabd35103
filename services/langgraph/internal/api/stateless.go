package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/turnstile-run/turnstile/pkg/frontdoor"
	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/pkg/region"
	"github.com/turnstile-run/turnstile/pkg/wire"
	"github.com/turnstile-run/turnstile/services/langgraph/internal/threads"
)

// Stateless runs (POST /runs, /runs/stream, /runs/wait: the SDK's runs.create, stream and wait
// with a null thread) run on a throwaway thread, as on the Platform: a new thread (minted ID, the
// run's metadata) holds the run, and with on_completion=delete (the default) it is deleted once
// the run has ended. Its stream cancels the run when the client leaves (on_disconnect defaults to
// cancel). A thread whose run outlives its waiter (a drain, a client gone with
// on_disconnect=continue) is kept and goes with TURNSTILE_LANGGRAPH_THREAD_TTL like any idle one.

func (h *Handler) createStatelessRun(w http.ResponseWriter, r *http.Request) {
	const route = "create_stateless_run"
	if nr, ok := h.parseRun(w, r, route, true); ok {
		h.createRunOf(w, r, route, nr)
	}
}

func (h *Handler) waitStatelessRun(w http.ResponseWriter, r *http.Request) {
	const route = "wait_stateless_run"
	if nr, ok := h.parseRun(w, r, route, true); ok {
		h.waitRunOf(w, r, route, nr)
	}
}

func (h *Handler) streamStatelessRun(w http.ResponseWriter, r *http.Request) {
	const route = "stream_stateless_run"
	if nr, ok := h.parseRun(w, r, route, true); ok {
		h.streamRunOf(w, r, route, nr)
	}
}

// throwawayThread makes a stateless run's thread.
func (h *Handler) throwawayThread(w http.ResponseWriter, r *http.Request, route string, nr newRun) (newRun, bool) {
	md, _ := json.Marshal(map[string]any{"stateless": true, "assistant_id": nr.body.AssistantID})
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.StoreTimeout)
	defer cancel()
	th, _, err := h.threads.Create(ctx, nr.tenant, region.NewID(h.cfg.Region.Code), md, h.cfg.ThreadsMax)
	switch {
	case errors.Is(err, threads.ErrLimit):
		h.refuse(w, route, h.threadsLimit())
		return newRun{}, false
	case err != nil:
		h.log.WarnContext(r.Context(), "create stateless thread failed", "err", err)
		h.refuse(w, route, h.storeDown("the run's thread cannot be stored now"))
		return newRun{}, false
	}
	nr.thread, nr.stateless = th, true
	return nr, true
}

// dropThrowaway deletes a stateless run's thread when its run was not queued.
func (h *Handler) dropThrowaway(r *http.Request, nr newRun) {
	if nr.stateless {
		h.deleteThrowaway(r.Context(), nr)
	}
}

func (h *Handler) deleteThrowaway(ctx context.Context, nr newRun) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.cfg.StoreTimeout)
	defer cancel()
	err := h.threads.Delete(ctx, nr.tenant, nr.thread.ID, wire.NewSessionKey(nr.tenant, nr.thread.ID))
	if err != nil && !errors.Is(err, threads.ErrNotFound) {
		// Busy (its run still runs) or Postgres down: the thread stays, and goes with the TTL.
		h.log.InfoContext(ctx, "stateless run's thread kept", "session_id", nr.thread.ID, "err", err)
	}
}

// afterStateless deletes a stateless run's thread once its run was seen to its end.
func (h *Handler) afterStateless(r *http.Request, nr newRun, runID string, ended bool) {
	if !nr.stateless || nr.body.OnCompletion == "keep" || !ended {
		return
	}
	h.log.DebugContext(r.Context(), "stateless run ended", "session_id", nr.thread.ID, "turn_id", runID)
	h.deleteThrowaway(r.Context(), nr)
}

// deleteWhenDone follows a background stateless run to its end, then deletes its thread. The
// follower is one of the handler's tracked streams: a drain ends it (the thread is kept).
func (h *Handler) deleteWhenDone(r *http.Request, nr newRun, acc frontdoor.Accepted) {
	tracked := h.Track(nil)
	ctx := context.WithoutCancel(r.Context())
	go func() {
		defer tracked.Release()
		err := h.waitTerminal(ctx, tracked.Done(), nr.thread.ID, acc.TurnID, acc.StreamToken)
		h.afterStateless(r.WithContext(ctx), nr, acc.TurnID, err == nil)
	}()
}

// checkHead accepts a run's checkpoint when it is the thread's head (what useStream sends once it
// has read the thread's history): turnstile continues a thread from its latest state only, so an
// older checkpoint (a branch, a replay) is refused as stale.
func (h *Handler) checkHead(r *http.Request, c caller, threadID string, body runBody) *httpx.Problem {
	id := body.CheckpointID
	if isSet(body.Checkpoint) {
		var cp struct {
			CheckpointID string `json:"checkpoint_id"`
			CheckpointNS string `json:"checkpoint_ns"`
		}
		if err := json.Unmarshal(body.Checkpoint, &cp); err != nil {
			p := httpx.ProblemValidation.Problem("checkpoint must be an object with a checkpoint_id")
			return &p
		}
		if cp.CheckpointNS != "" {
			p := httpx.ProblemValidation.Problem("checkpoint_ns is not supported: a thread has no subgraphs")
			return &p
		}
		if cp.CheckpointID != "" {
			id = cp.CheckpointID
		}
	}
	if id == "" {
		return nil
	}
	v, err := h.threadView(r.Context(), c, threadID)
	if err != nil {
		p := h.storeDown("the thread's state cannot be read now")
		return &p
	}
	head := v.head(threadID)
	if id == head {
		return nil
	}
	detail := "checkpoint " + id + " is not the thread's latest (" + head + "): a run continues a thread from its latest state only, so forking or replaying from an earlier checkpoint is not supported"
	if head == "" {
		detail = "checkpoint " + id + " is not the thread's: the thread has no checkpoint yet"
	}
	p := httpx.ProblemStaleCheckpoint.Problem(detail)
	return &p
}

// deleteRun answers DELETE /threads/{thread_id}/runs/{run_id} (the SDK's runs.delete): the run is
// gone from the thread's runs (404 from then on); the thread's state keeps what the run did, as on
// the Platform. A run queued or running is a 409 (cancel it first). The turn's row stays until
// retention, so a redelivered record never runs it again.
func (h *Handler) deleteRun(w http.ResponseWriter, r *http.Request) {
	const route = "delete_run"
	c, th, t, ok := h.run(w, r, route)
	if !ok {
		return
	}
	if !t.Status.Terminal() {
		h.refuse(w, route, httpx.ProblemThreadBusy.Problem("run "+t.TurnID+" is "+runStatus(t.Status)+": cancel it (or wait for it) first"))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.StoreTimeout)
	defer cancel()
	if err := h.threads.DeleteRun(ctx, c.tenant, th.ID, t.TurnID, false); err != nil {
		h.log.WarnContext(r.Context(), "delete run failed", "session_id", th.ID, "turn_id", t.TurnID, "err", err)
		h.refuse(w, route, h.storeDown("the run cannot be deleted now"))
		return
	}
	h.ok(route)
	w.WriteHeader(http.StatusNoContent)
}
