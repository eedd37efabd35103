package sse

import (
	"bufio"
	"io"
	"strings"
)

// Event is one dispatched SSE event.
type Event struct {
	ID   string
	Type string
	Data string
}

// Reader reads events from a stream body.
type Reader struct {
	br *bufio.Reader
}

// NewReader reads events from r.
func NewReader(r io.Reader) *Reader { return &Reader{br: bufio.NewReaderSize(r, 16<<10)} }

// Next returns the next event. Comment lines and retry hints are skipped; an event without data is
// not dispatched, as the format says. At the end of the body it returns io.EOF (or the read error).
func (r *Reader) Next() (Event, error) {
	var ev Event
	var data strings.Builder
	hasData := false
	for {
		line, err := r.br.ReadString('\n')
		if err != nil {
			return Event{}, err
		}
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		if line == "" {
			if hasData {
				ev.Data = data.String()
				return ev, nil
			}
			ev = Event{}
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			ev.ID = value
		case "event":
			ev.Type = value
		case "data":
			if hasData {
				data.WriteByte('\n')
			}
			data.WriteString(value)
			hasData = true
		}
	}
}
