package sse

import (
	"io"
	"strconv"
	"strings"
)

// eventWriter writes SSE frames into the ResponseWriter (already buffered by net/http), one Write
// per frame from a scratch buffer that grows to the largest frame, so an idle stream holds no
// buffer of its own. Data lines are split on newlines as the format requires.
type eventWriter struct {
	w   io.Writer
	buf []byte
	err error
}

func newEventWriter(w io.Writer) *eventWriter { return &eventWriter{w: w} }

func (e *eventWriter) write() {
	if e.err == nil {
		_, e.err = e.w.Write(e.buf)
	}
	if cap(e.buf) > 64<<10 {
		e.buf = nil // do not keep one huge event's buffer for the stream's life
	} else {
		e.buf = e.buf[:0]
	}
}

func (e *eventWriter) event(id, name, data string) {
	b := e.buf[:0]
	if id != "" {
		b = append(b, "id: "...)
		b = append(b, id...)
		b = append(b, '\n')
	}
	b = append(b, "event: "...)
	b = append(b, name...)
	b = append(b, '\n')
	for {
		line, rest, more := strings.Cut(data, "\n")
		b = append(b, "data: "...)
		b = append(b, line...)
		b = append(b, '\n')
		if !more {
			break
		}
		data = rest
	}
	e.buf = append(b, '\n')
	e.write()
}

func (e *eventWriter) retry(ms int64) {
	b := append(e.buf[:0], "retry: "...)
	b = strconv.AppendInt(b, ms, 10)
	e.buf = append(b, "\n\n"...)
	e.write()
}

func (e *eventWriter) comment(text string) {
	b := append(e.buf[:0], ": "...)
	b = append(b, text...)
	e.buf = append(b, "\n\n"...)
	e.write()
}

// flush reports the first write error; the caller then flushes the ResponseWriter.
func (e *eventWriter) flush() error { return e.err }
