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
	e.buf = e.buf[:0]
	if id != "" {
		e.buf = append(e.buf, "id: "...)
		e.buf = append(e.buf, id...)
		e.buf = append(e.buf, '\n')
	}
	e.buf = append(e.buf, "event: "...)
	e.buf = append(e.buf, name...)
	e.buf = append(e.buf, '\n')
	for {
		line, rest, more := strings.Cut(data, "\n")
		e.buf = append(e.buf, "data: "...)
		e.buf = append(e.buf, line...)
		e.buf = append(e.buf, '\n')
		if !more {
			break
		}
		data = rest
	}
	e.buf = append(e.buf, '\n')
	e.write()
}

func (e *eventWriter) retry(ms int64) {
	e.buf = append(e.buf[:0], "retry: "...)
	e.buf = strconv.AppendInt(e.buf, ms, 10)
	e.buf = append(e.buf, "\n\n"...)
	e.write()
}

func (e *eventWriter) comment(text string) {
	e.buf = append(e.buf[:0], ": "...)
	e.buf = append(e.buf, text...)
	e.buf = append(e.buf, "\n\n"...)
	e.write()
}

// flush reports the first write error; the caller then flushes the ResponseWriter.
func (e *eventWriter) flush() error { return e.err }
