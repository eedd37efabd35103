package chat

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/turnstile-run/turnstile/pkg/frontdoor"
	"github.com/turnstile-run/turnstile/services/aisdk/internal/uistream"
)

// stream opens the turn's native stream and relays it as a UI message stream. Until the native
// stream answers, a refusal is still the native problem; after that the answer is a 200 stream.
func (h *Handler) stream(w http.ResponseWriter, r *http.Request, route string, log *slog.Logger,
	req frontdoor.StreamRequest, turnID string, cur uistream.Cursor,
) {
	tracked := h.Track(nil)
	defer tracked.Release()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()

	ns, err := h.fd.OpenStream(ctx, req)
	if err != nil {
		h.refuse(w, route, err)
		return
	}

	// The pump feeds the loop so keep-alives go out while the native stream is silent (a takeover
	// waits seconds for the dead worker's lease).
	events, stop := ns.Pump(ctx)
	defer stop()

	h.open.WithLabelValues(route).Inc()
	defer h.open.WithLabelValues(route).Dec()
	out := uistream.NewWriter(w, h.cfg.WriteTimeout)
	rs := uistream.NewResumer(turnID, cur)
	keepAlive := time.NewTicker(h.cfg.KeepAlive)
	defer keepAlive.Stop()
	for {
		select {
		case <-ctx.Done():
			// The client left.
			h.requests.WithLabelValues(route, "cut").Inc()
			return
		case <-tracked.Done():
			// The role stops: a stream without its end is what the SDK resumes from, so the
			// connection is cut rather than ended cleanly.
			h.requests.WithLabelValues(route, "cut").Inc()
			panic(http.ErrAbortHandler)
		case <-keepAlive.C:
			if err := out.KeepAlive(); err != nil {
				h.requests.WithLabelValues(route, "cut").Inc()
				return
			}
		case n := <-events:
			if n.Err != nil {
				if errors.Is(n.Err, io.EOF) {
					// The native stream ended after the turn's terminal event, which ended the
					// parts; a stream that ended without one is cut (the client resumes).
					if rs.Done() {
						h.requests.WithLabelValues(route, "streamed").Inc()
						_ = out.Done()
						return
					}
				}
				h.requests.WithLabelValues(route, "failed").Inc()
				log.Warn("native stream ended before the turn did", "err", n.Err, "parts", out.Count())
				if out.Count() == 0 {
					_ = out.Parts("", []uistream.Part{{"type": "error", "errorText": "the turn's stream is unavailable; retry"}})
					return
				}
				panic(http.ErrAbortHandler)
			}
			parts, err := rs.Render(n.Event.ID, n.Event.Type, n.Event.Data)
			if err != nil {
				log.Warn("unreadable native event", "err", err, "event", n.Event.Type, "id", n.Event.ID)
				continue
			}
			if err := out.Parts(n.Event.ID, parts); err != nil {
				h.requests.WithLabelValues(route, "cut").Inc()
				return
			}
			if rs.Done() {
				h.requests.WithLabelValues(route, "streamed").Inc()
				_ = out.Done()
				return
			}
		}
	}
}
