package sse

import (
	"bufio"
	"io"
	"strconv"
	"strings"
)

// eventWriter writes SSE frames. Data lines are split on newlines as the format requires.
type eventWriter struct {
	w *bufio.Writer
}

func newEventWriter(w io.Writer) *eventWriter { return &eventWriter{w: bufio.NewWriterSize(w, 4096)} }

func (e *eventWriter) event(id, name, data string) {
	if id != "" {
		e.w.WriteString("id: ")
		e.w.WriteString(id)
		e.w.WriteByte('\n')
	}
	e.w.WriteString("event: ")
	e.w.WriteString(name)
	e.w.WriteByte('\n')
	for {
		line, rest, more := strings.Cut(data, "\n")
		e.w.WriteString("data: ")
		e.w.WriteString(line)
		e.w.WriteByte('\n')
		if !more {
			break
		}
		data = rest
	}
	e.w.WriteByte('\n')
}

func (e *eventWriter) retry(ms int64) {
	e.w.WriteString("retry: ")
	e.w.WriteString(strconv.FormatInt(ms, 10))
	e.w.WriteString("\n\n")
}

func (e *eventWriter) comment(text string) {
	e.w.WriteString(": ")
	e.w.WriteString(text)
	e.w.WriteString("\n\n")
}

func (e *eventWriter) flush() error { return e.w.Flush() }
