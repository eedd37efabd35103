package rpc

import (
	"bytes"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/turnstile-run/turnstile/pkg/httpx"
	"github.com/turnstile-run/turnstile/services/a2a/internal/tasks"
)

// writer sits between the SDK and the client. It holds the status line back until the first byte
// of the body, so a refusal the handler asked for (Call.Refusal) can still become an HTTP 429/503;
// it replaces the SDK's random SSE ids with the call's and writes keep-alives between events. The
// SDK writes each SSE event as an "id:" line and then a "data:" line; the writer drops the first
// and writes the call's id before the second, under one lock, so a keep-alive never splits an
// event.
type writer struct {
	w         http.ResponseWriter
	flusher   http.Flusher
	rc        *http.ResponseController
	call      *tasks.Call
	streaming bool
	// writeTimeout bounds each write of a stream, so a client that stopped reading is dropped
	// (it resubscribes from its last id) instead of holding the stream for good.
	writeTimeout time.Duration

	mu        sync.Mutex
	status    int
	committed bool
	// refused: the answer became a refusal; the SDK's later writes are dropped.
	refused bool

	stop chan struct{}
	done chan struct{}
}

func newWriter(w http.ResponseWriter, call *tasks.Call, streaming bool, keepAlive, writeTimeout time.Duration) *writer {
	fl, _ := w.(http.Flusher)
	wr := &writer{
		w: w, flusher: fl, rc: http.NewResponseController(w), call: call, streaming: streaming, writeTimeout: writeTimeout,
		status: http.StatusOK, stop: make(chan struct{}), done: make(chan struct{}),
	}
	if !streaming || fl == nil {
		close(wr.done)
		return wr
	}
	go wr.keepAlive(keepAlive)
	return wr
}

// keepAlive sends the stream's headers once the stream is open and, from then on, a comment every
// interval.
func (wr *writer) keepAlive(every time.Duration) {
	defer close(wr.done)
	t := time.NewTicker(every)
	defer t.Stop()
	ready := wr.call.Ready()
	for {
		select {
		case <-wr.stop:
			return
		case <-ready:
			ready = nil
			wr.mu.Lock()
			if !wr.committed {
				wr.commit()
				wr.flusher.Flush()
			}
			wr.mu.Unlock()
		case <-t.C:
			wr.mu.Lock()
			// Before the stream is open nothing is sent: a refusal may still become its status.
			if wr.committed && !wr.refused {
				wr.deadline()
				_, _ = wr.w.Write([]byte(": keep-alive\n\n"))
				wr.flusher.Flush()
			}
			wr.mu.Unlock()
		}
	}
}

func (wr *writer) Header() http.Header { return wr.w.Header() }

// WriteHeader records the status; it is sent with the first byte of the body.
func (wr *writer) WriteHeader(code int) {
	wr.mu.Lock()
	wr.status = code
	wr.mu.Unlock()
}

func (wr *writer) sse() bool { return wr.w.Header().Get("Content-Type") == "text/event-stream" }

// commit sends the status line (wr.mu held). The SDK names no content type for plain answers.
func (wr *writer) commit() {
	wr.committed = true
	if wr.w.Header().Get("Content-Type") == "" {
		wr.w.Header().Set("Content-Type", "application/json")
	}
	wr.w.WriteHeader(wr.status)
}

// deadline bounds the next write of a stream (wr.mu held).
func (wr *writer) deadline() {
	if wr.streaming && wr.writeTimeout > 0 {
		_ = wr.rc.SetWriteDeadline(time.Now().Add(wr.writeTimeout))
	}
}

func (wr *writer) Write(p []byte) (int, error) {
	wr.mu.Lock()
	defer wr.mu.Unlock()
	if wr.refused {
		return len(p), nil
	}
	sse := wr.sse()
	if sse && bytes.HasPrefix(p, []byte("id: ")) {
		return len(p), nil
	}
	if !wr.committed {
		if status, retry := wr.call.Refusal(); status != 0 {
			wr.refuse(status, retry, sse, p)
			return len(p), nil
		}
		wr.commit()
	}
	wr.deadline()
	if sse && bytes.HasPrefix(p, []byte("data: ")) {
		if id := wr.call.NextID(); id != "" {
			if _, err := wr.w.Write([]byte("id: " + id + "\n")); err != nil { //nolint:gosec // JSON-RPC answers and SSE events, never HTML
				return 0, err
			}
		}
	}
	return wr.w.Write(p) //nolint:gosec // JSON-RPC answers and SSE events, never HTML
}

// refuse answers the refusal the handler asked for: its status, Retry-After, and the JSON-RPC
// error as a plain JSON body (wr.mu held).
func (wr *writer) refuse(status int, retry time.Duration, sse bool, p []byte) {
	wr.refused, wr.committed = true, true
	h := wr.w.Header()
	if sse {
		p = bytes.TrimSpace(bytes.TrimPrefix(p, []byte("data: ")))
		h.Del("Cache-Control")
		h.Del("Connection")
		h.Del("X-Accel-Buffering")
	}
	h.Set("Content-Type", "application/json")
	httpx.Challenge(wr.w, status)
	if retry > 0 || status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		h.Set("Retry-After", strconv.Itoa(max(1, int((retry+time.Second-1)/time.Second))))
	}
	wr.w.WriteHeader(status)
	_, _ = wr.w.Write(append(bytes.TrimSpace(p), '\n')) //nolint:gosec // JSON-RPC answers and SSE events, never HTML
}

// Flush flushes what was written (nothing before the status line is sent).
func (wr *writer) Flush() {
	wr.mu.Lock()
	defer wr.mu.Unlock()
	if wr.committed && !wr.refused && wr.flusher != nil {
		wr.flusher.Flush()
	}
}

// finish stops the keep-alives and, when the SDK wrote nothing, sends the status line and empty
// (if not nil): the SDK writes no response at all for a method whose result is null
// (tasks/pushNotificationConfig/delete), which its own client cannot decode.
func (wr *writer) finish(empty []byte) {
	close(wr.stop)
	<-wr.done
	wr.mu.Lock()
	defer wr.mu.Unlock()
	if !wr.committed {
		wr.commit()
		if empty != nil && !wr.streaming {
			_, _ = wr.w.Write(empty)
		}
	}
}
