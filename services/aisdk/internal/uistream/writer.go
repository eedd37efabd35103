package uistream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// HeaderName and HeaderValue mark a response as a UI message stream; the AI SDK's transport reads
// it to pick the protocol.
const (
	HeaderName  = "x-vercel-ai-ui-message-stream"
	HeaderValue = "v1"
)

// Writer writes parts as Server-Sent Events, each write bounded by a deadline so a client that
// stopped reading is dropped. Not safe for concurrent use.
type Writer struct {
	w            http.ResponseWriter
	rc           *http.ResponseController
	writeTimeout time.Duration
	buf          bytes.Buffer
	parts        int
}

// NewWriter sets the stream's headers and status 200 on w. writeTimeout bounds each write (zero:
// none).
func NewWriter(w http.ResponseWriter, writeTimeout time.Duration) *Writer {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	h.Set(HeaderName, HeaderValue)
	w.WriteHeader(http.StatusOK)
	return &Writer{w: w, rc: http.NewResponseController(w), writeTimeout: writeTimeout}
}

// Parts writes the parts of one native event, each with the event's native id as its SSE id, and
// flushes.
func (w *Writer) Parts(id string, parts []Part) error {
	if len(parts) == 0 {
		return nil
	}
	w.buf.Reset()
	for _, p := range parts {
		b, err := json.Marshal(p)
		if err != nil {
			return fmt.Errorf("encode %s part: %w", p.Type(), err)
		}
		if id != "" && !strings.ContainsAny(id, "\r\n") {
			w.buf.WriteString("id: " + id + "\n")
		}
		w.buf.WriteString("data: ")
		w.buf.Write(b)
		w.buf.WriteString("\n\n")
	}
	w.parts += len(parts)
	return w.flush()
}

// Count is how many parts were written.
func (w *Writer) Count() int { return w.parts }

// Done writes the protocol's end marker, `data: [DONE]`.
func (w *Writer) Done() error {
	w.buf.Reset()
	w.buf.WriteString("data: [DONE]\n\n")
	return w.flush()
}

// KeepAlive writes an SSE comment, which the SDK's parser ignores and which keeps proxies from
// closing an idle stream (a turn waiting for a takeover is silent for seconds).
func (w *Writer) KeepAlive() error {
	w.buf.Reset()
	w.buf.WriteString(": keep-alive\n\n")
	return w.flush()
}

func (w *Writer) flush() error {
	if w.writeTimeout > 0 {
		_ = w.rc.SetWriteDeadline(time.Now().Add(w.writeTimeout))
	}
	if _, err := w.w.Write(w.buf.Bytes()); err != nil {
		return fmt.Errorf("write stream: %w", err)
	}
	if err := w.rc.Flush(); err != nil {
		return fmt.Errorf("flush stream: %w", err)
	}
	return nil
}
