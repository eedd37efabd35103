package sse

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Event is one server-sent event.
type Event struct {
	Name string
	Data string
}

// ErrTooLarge is returned when one line or event exceeds the reader's limit.
var ErrTooLarge = errors.New("sse: event exceeds the size limit")

// Reader reads events.
type Reader struct {
	sc  *bufio.Scanner
	max int
}

// NewReader reads events from r; no event may exceed maxEvent bytes.
func NewReader(r io.Reader, maxEvent int) *Reader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxEvent)
	return &Reader{sc: sc, max: maxEvent}
}

// Next returns the next event; io.EOF when the stream ended cleanly between events, and
// io.ErrUnexpectedEOF when it ended inside one.
func (r *Reader) Next() (Event, error) {
	var ev Event
	var data strings.Builder
	seen := false
	for r.sc.Scan() {
		line := r.sc.Text()
		if line == "" {
			if seen {
				ev.Data = data.String()
				return ev, nil
			}
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			ev.Name = value
			seen = true
		case "data":
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			if data.Len()+len(value) > r.max {
				return Event{}, ErrTooLarge
			}
			data.WriteString(value)
			seen = true
		}
	}
	if err := r.sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return Event{}, ErrTooLarge
		}
		return Event{}, fmt.Errorf("read event stream: %w", err)
	}
	if seen {
		// A last event without its blank line: the stream was cut.
		return Event{}, io.ErrUnexpectedEOF
	}
	return Event{}, io.EOF
}
