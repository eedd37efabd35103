package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/turnstile-run/turnstile/pkg/frontdoor"
	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/services/langgraph/internal/render"
)

// writeTimeout bounds one write to a stream's client; a client that stops reading is dropped and
// rejoins from its last event ID.
const writeTimeout = 10 * time.Second

// cursor is a position in a run's protocol stream (see the package doc on event IDs).
type cursor struct {
	native string // resume the native stream after this ID; empty: from the run's first event
	skip   int    // protocol events of the first native event read that the client has seen
}

// parseCursor reads a Last-Event-ID. Empty and "-1" (what useStream sends to replay a run) mean
// the run's start.
func parseCursor(s string) (cursor, bool) {
	s = strings.TrimSpace(s)
	if s == "" || s == "-1" {
		return cursor{}, true
	}
	if i := strings.LastIndexByte(s, '~'); i >= 0 {
		k, err := strconv.Atoi(s[i+1:])
		if err != nil || k < 0 {
			return cursor{}, false
		}
		return cursor{native: s[:i], skip: k + 1}, true
	}
	return cursor{native: s}, true
}

// subID is the ID of the k-th protocol event of a native event that is not its last, prev being
// the native event before it.
func subID(prev string, k int) string { return prev + "~" + strconv.Itoa(k) }

// streamArgs say which run a stream follows and from where.
type streamArgs struct {
	caller
	threadID string
	run      *render.Run
	token    string
	from     cursor
	// metadata sends the metadata event first (a stream from the run's start).
	metadata bool
	// cancelOnDisconnect cancels the run when the client leaves before its end (on_disconnect=
	// cancel, a join's cancel_on_disconnect=1); a drain or cut does not cancel it.
	cancelOnDisconnect bool
}

// streamRun queues a run and streams it (POST /threads/{thread_id}/runs/stream).
func (h *Handler) streamRun(w http.ResponseWriter, r *http.Request) {
	const route = "stream_run"
	if nr, ok := h.parseRun(w, r, route, false); ok {
		h.streamRunOf(w, r, route, nr)
	}
}

func (h *Handler) streamRunOf(w http.ResponseWriter, r *http.Request, route string, nr newRun) {
	acc, err := h.post(r, nr)
	if err != nil {
		h.relay(w, r, route, err)
		h.dropThrowaway(r, nr)
		return
	}
	run := &render.Run{RunID: acc.TurnID, ThreadID: nr.thread.ID, AssistantID: nr.body.AssistantID, Modes: nr.modes, Input: nr.text}
	ended := h.serveStream(w, r, route, streamArgs{
		caller: nr.caller, threadID: nr.thread.ID, run: run, token: acc.StreamToken, metadata: true,
		cancelOnDisconnect: nr.cancelOnDisconnect(),
	})
	h.afterStateless(r, nr, acc.TurnID, ended)
}

// joinStream streams an existing run from its start or from Last-Event-ID
// (GET /threads/{thread_id}/runs/{run_id}/stream).
func (h *Handler) joinStream(w http.ResponseWriter, r *http.Request) {
	const route = "join_stream"
	from, ok := parseCursor(r.Header.Get("Last-Event-ID"))
	if !ok {
		h.refuse(w, route, httpx.ProblemInvalidCursor.Problem("Last-Event-ID is not an event ID of this run's stream"))
		return
	}
	c, th, t, ok := h.run(w, r, route)
	if !ok {
		return
	}
	rm := runMetaOf(t)
	var modes []render.Mode
	if q := r.URL.Query()["stream_mode"]; len(q) > 0 {
		raw, _ := json.Marshal(q)
		m, err := render.ParseModes(raw)
		if err != nil {
			h.refuse(w, route, httpx.ProblemValidation.Problem(err.Error()))
			return
		}
		modes = m
	} else if len(rm.StreamMode) > 0 {
		modes = rm.StreamMode
	} else {
		// The run's own modes are not known until a worker has taken it: render every mode.
		modes = []render.Mode{render.ModeValues, render.ModeMessagesTuple, render.ModeUpdates, render.ModeCustom}
	}
	assistant := rm.AssistantID
	if assistant == "" && len(h.cfg.Assistants) > 0 {
		assistant = h.cfg.Assistants[0]
	}
	g, err := h.fd.StreamToken(r.Context(), c.cred, th.ID)
	if err != nil {
		h.relay(w, r, route, err)
		return
	}
	runID := t.TurnID
	run := &render.Run{RunID: runID, ThreadID: th.ID, AssistantID: assistant, Modes: modes, Input: textOf(t.Input)}
	h.serveStream(w, r, route, streamArgs{
		caller: c, threadID: th.ID, run: run, token: g.StreamToken, from: from, metadata: from == cursor{},
		cancelOnDisconnect: queryTrue(r, "cancel_on_disconnect"),
	})
}

func queryTrue(r *http.Request, name string) bool {
	v := r.URL.Query().Get(name)
	return v == "1" || v == "true"
}

func runMetaOf(t frontdoor.Turn) runMeta {
	var md struct {
		LangGraph runMeta `json:"langgraph"`
	}
	_ = json.Unmarshal(t.Metadata, &md)
	return md.LangGraph
}

// serveStream follows the run's native stream and writes it as LangGraph SSE until the run's
// terminal event, the client leaving, or a drain (which ends the stream without an end event, so
// the client rejoins). It says whether the run's end was written; a client that left before it
// has its run cancelled when a.cancelOnDisconnect.
func (h *Handler) serveStream(w http.ResponseWriter, r *http.Request, route string, a streamArgs) (ended bool) {
	tracked := h.Track(nil)
	defer tracked.Release()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	st, err := h.fd.OpenStream(ctx, frontdoor.StreamRequest{
		SessionID: a.threadID, Token: a.token, LastEventID: a.from.native, TurnID: a.run.RunID,
	})
	if err != nil {
		h.relay(w, r, route, err)
		return false
	}
	clientLeft := false
	defer func() {
		if clientLeft && !ended && a.cancelOnDisconnect {
			h.cancelOnLeave(r, a)
		}
	}()
	events, stop := st.Pump(ctx)
	defer stop()

	log := h.log.With("session_id", a.threadID, "turn_id", a.run.RunID, "route", route)
	path := runPath(a.threadID, a.run.RunID)
	modes := url.Values{}
	for _, m := range a.run.Modes {
		modes.Add("stream_mode", string(m))
	}
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-cache")
	hd.Set("X-Accel-Buffering", "no")
	hd.Set("Content-Location", path)
	hd.Set("Location", path+"/stream?"+modes.Encode())
	w.WriteHeader(http.StatusOK)
	h.ok(route)
	sw := &sseWriter{w: w, rc: http.NewResponseController(w)}
	if a.metadata {
		sw.event("", a.run.Metadata(1))
	}
	if sw.flush() != nil {
		clientLeft = true
		return false
	}

	tick := time.NewTicker(h.cfg.KeepAlive)
	defer tick.Stop()
	prev, skip := a.from.native, a.from.skip
	// The run's context (earlier messages, its input) is read at its first event: by then every
	// earlier turn of the session has ended.
	contextKnown := false
	for {
		select {
		case <-tracked.Done():
			return false
		case <-ctx.Done():
			clientLeft = true
			return false
		case <-tick.C:
			sw.comment("keepalive")
			if sw.flush() != nil {
				clientLeft = true
				return false
			}
		case res := <-events:
			if res.Err != nil {
				if !errors.Is(res.Err, io.EOF) && ctx.Err() == nil {
					log.WarnContext(ctx, "run stream ended", "err", res.Err)
					sw.event("", render.Event{Name: "error", Data: errorData("StreamError", "the run's stream ended: "+res.Err.Error())})
					_ = sw.flush()
				}
				clientLeft = r.Context().Err() != nil
				return false
			}
			if !contextKnown {
				h.loadRunContext(ctx, a, log)
				contextKnown = true
			}
			outs, terminal := a.run.Render(res.Event.Type, res.Event.Data)
			for i, o := range outs {
				if skip > 0 {
					skip--
					continue
				}
				id := res.Event.ID
				if i < len(outs)-1 {
					id = subID(prev, i)
				}
				sw.event(id, o)
			}
			skip, prev = 0, res.Event.ID
			if err := sw.flush(); err != nil {
				clientLeft = true
				return false
			}
			if terminal {
				return true
			}
		}
	}
}

// cancelOnLeave cancels the run of a stream whose client left before its end.
func (h *Handler) cancelOnLeave(r *http.Request, a streamArgs) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), h.cfg.StoreTimeout)
	defer cancel()
	if _, err := h.fd.CancelTurn(ctx, a.cred, a.run.RunID); err != nil {
		h.log.WarnContext(ctx, "cancel on disconnect failed", "session_id", a.threadID, "turn_id", a.run.RunID, "err", err)
		return
	}
	h.log.InfoContext(ctx, "run cancelled: its stream's client left", "session_id", a.threadID, "turn_id", a.run.RunID)
}

// loadRunContext reads the thread's turns once the run has begun (every earlier turn of the
// session is terminal by then): the messages before the run, and its input when not known yet.
func (h *Handler) loadRunContext(ctx context.Context, a streamArgs, log *slog.Logger) {
	v, err := h.threadView(ctx, a.caller, a.threadID)
	if err != nil {
		log.WarnContext(ctx, "thread history unavailable; values carry the run's messages only", "err", err)
		return
	}
	rts := renderTurns(v.turns)
	var prior []render.Turn
	for _, t := range rts {
		if t.ID == a.run.RunID {
			if a.run.Input == "" {
				a.run.Input = t.Input
			}
			break
		}
		prior = append(prior, t)
	}
	a.run.Prior = append(append([]render.Message{}, v.base...), render.ThreadMessages(prior)...)
}

func errorData(name, message string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"error": name, "message": message})
	return b
}

// sseWriter writes SSE frames; the first failed write sticks.
type sseWriter struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	err error
}

func (s *sseWriter) event(id string, e render.Event) {
	if s.err != nil {
		return
	}
	_ = s.rc.SetWriteDeadline(time.Now().Add(writeTimeout))
	data := e.Data
	if len(data) == 0 {
		data = json.RawMessage("null")
	}
	if id != "" {
		_, s.err = fmt.Fprintf(s.w, "event: %s\nid: %s\ndata: %s\n\n", e.Name, id, data)
		return
	}
	_, s.err = fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", e.Name, data)
}

func (s *sseWriter) comment(text string) {
	if s.err != nil {
		return
	}
	_ = s.rc.SetWriteDeadline(time.Now().Add(writeTimeout))
	_, s.err = fmt.Fprintf(s.w, ": %s\n\n", text)
}

func (s *sseWriter) flush() error {
	if s.err == nil {
		s.err = s.rc.Flush()
	}
	return s.err
}
