package sse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// DefaultMaxBytes is the bound on one line and on one event's data when NewReader is given none.
const DefaultMaxBytes = 1 << 20

// ErrTooLarge is returned when one line or one event's data exceeds the reader's limit.
var ErrTooLarge = errors.New("sse: event exceeds the size limit")

// Event is one dispatched event.
type Event struct {
	// ID is the stream's last event ID when the event was dispatched: the value of the latest id
	// field so far, on this event or an earlier one.
	ID string
	// Type is the event field's value, or "message" when there was none.
	Type string
	// Data is the event's data lines joined with "\n".
	Data string
}

// Reader reads events from one stream. It is not safe for concurrent use.
type Reader struct {
	br  *bufio.Reader
	max int
	err error // sticky: once set, Next returns it

	started   bool // the byte order mark check is done
	skipLF    bool // the last line ended with CR, so an LF right after it belongs to that line end
	line      []byte
	data      []byte
	hasData   bool // a data field came since the last dispatch, so data holds one LF per field
	typ       string
	hasType   bool
	lastID    string
	retry     time.Duration
	retrySeen bool
}

// readBufferSize is the reader's buffer. A line longer than it is gathered across reads (up to
// maxBytes), so it bounds no event; it is small because a held stream keeps it for its whole life
// (a worker holding thousands of model streams holds thousands of them) and a model's streamed
// chunk, the event a worker reads most, is about 200 bytes: it fits, and reading from an HTTP/2
// body is a copy from memory, so a longer line read in pieces costs copies, not system calls
// (BenchmarkReader).
const readBufferSize = 256

// NewReader reads events from r. No line and no event's data may exceed maxBytes; zero or less
// means DefaultMaxBytes.
func NewReader(r io.Reader, maxBytes int) *Reader {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	return &Reader{br: bufio.NewReaderSize(r, min(maxBytes, readBufferSize)), max: maxBytes}
}

// MaxBytes returns the reader's bound on one line and one event's data.
func (r *Reader) MaxBytes() int { return r.max }

// LastEventID returns the stream's last event ID so far, including one set by an id field of an
// event that was never dispatched.
func (r *Reader) LastEventID() string { return r.lastID }

// Retry returns the latest reconnection time the stream set with a retry field, if any.
func (r *Reader) Retry() (time.Duration, bool) { return r.retry, r.retrySeen }

// Next returns the next dispatched event. It returns io.EOF when the stream ended between events,
// io.ErrUnexpectedEOF when it ended inside one (the event is discarded, as the standard says), an
// error wrapping ErrTooLarge when a line or the event's data exceeds the limit, and the read error
// otherwise. After an error every later call returns the same error.
func (r *Reader) Next() (Event, error) {
	if r.err != nil {
		return Event{}, r.err
	}
	for {
		line, err := r.readLine()
		if err != nil {
			if errors.Is(err, io.EOF) && (len(line) > 0 || r.hasData || r.hasType) {
				err = io.ErrUnexpectedEOF
			}
			r.err = err
			return Event{}, err
		}
		if len(line) == 0 {
			if ev, ok := r.dispatch(); ok {
				return ev, nil
			}
			continue
		}
		if err := r.field(line); err != nil {
			r.err = err
			return Event{}, err
		}
	}
}

// dispatch ends the event being read and returns it, unless it has no data.
func (r *Reader) dispatch() (Event, bool) {
	defer func() {
		r.data, r.hasData = r.data[:0], false
		r.typ, r.hasType = "", false
	}()
	if !r.hasData {
		return Event{}, false
	}
	ev := Event{ID: r.lastID, Type: "message", Data: string(r.data[:len(r.data)-1])}
	if r.typ != "" {
		ev.Type = r.typ
	}
	return ev, true
}

// field processes one non-empty line.
func (r *Reader) field(line []byte) error {
	if line[0] == ':' {
		return nil
	}
	name, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(name) {
	case "event":
		r.typ, r.hasType = decode(value), true
	case "data":
		v := decode(value)
		// The data buffer ends in an LF that dispatch drops, so this bounds the event's data.
		if len(r.data)+len(v) > r.max {
			return fmt.Errorf("%w: an event's data is longer than %d bytes", ErrTooLarge, r.max)
		}
		r.data = append(r.data, v...)
		r.data = append(r.data, '\n')
		r.hasData = true
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			r.lastID = decode(value)
		}
	case "retry":
		if ms, ok := digits(value); ok {
			r.retry, r.retrySeen = ms, true
		}
	}
	return nil
}

// digits reads a retry value: ASCII digits only, in milliseconds, saturating where a duration
// cannot hold it.
func digits(v []byte) (time.Duration, bool) {
	if len(v) == 0 {
		return 0, false
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	ms, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil || ms > math.MaxInt64/int64(time.Millisecond) {
		return time.Duration(math.MaxInt64), true
	}
	return time.Duration(ms) * time.Millisecond, true
}

// readLine returns the next line without its end. At the end of the stream it returns what it read
// of an unfinished line with the error.
func (r *Reader) readLine() ([]byte, error) {
	r.line = r.line[:0]
	if r.skipLF {
		b, err := r.br.ReadByte()
		if err != nil {
			return nil, r.readErr(err)
		}
		r.skipLF = false
		if b != '\n' {
			_ = r.br.UnreadByte()
		}
	}
	if !r.started {
		bom, err := r.br.Peek(3)
		if err != nil && len(bom) < 3 && !errors.Is(err, io.EOF) {
			return nil, r.readErr(err)
		}
		if bytes.HasPrefix(bom, []byte("\uFEFF")) {
			_, _ = r.br.Discard(3)
		}
		r.started = true
	}
	for {
		if r.br.Buffered() == 0 {
			if _, err := r.br.Peek(1); err != nil {
				return r.line, r.readErr(err)
			}
		}
		buf, _ := r.br.Peek(r.br.Buffered())
		i := bytes.IndexAny(buf, "\r\n")
		n := len(buf)
		if i >= 0 {
			n = i
		}
		if len(r.line)+n > r.max {
			return nil, fmt.Errorf("%w: a line is longer than %d bytes", ErrTooLarge, r.max)
		}
		r.line = append(r.line, buf[:n]...)
		if i < 0 {
			_, _ = r.br.Discard(n)
			continue
		}
		r.skipLF = buf[i] == '\r'
		_, _ = r.br.Discard(i + 1)
		return r.line, nil
	}
}

func (r *Reader) readErr(err error) error {
	if errors.Is(err, io.EOF) {
		return io.EOF
	}
	return fmt.Errorf("read event stream: %w", err)
}

// decode returns b as a string, with each ill-formed sequence replaced by U+FFFD as the WHATWG
// Encoding standard's UTF-8 decoder replaces it: one U+FFFD for each maximal prefix of a valid
// sequence and for each byte that starts none.
func decode(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	out := make([]byte, 0, len(b)+8)
	for i := 0; i < len(b); {
		c := b[i]
		if c < 0x80 {
			out = append(out, c)
			i++
			continue
		}
		need, lower, upper := 0, byte(0x80), byte(0xBF)
		switch {
		case c >= 0xC2 && c <= 0xDF:
			need = 1
		case c >= 0xE0 && c <= 0xEF:
			need = 2
			switch c {
			case 0xE0:
				lower = 0xA0
			case 0xED:
				upper = 0x9F
			}
		case c >= 0xF0 && c <= 0xF4:
			need = 3
			switch c {
			case 0xF0:
				lower = 0x90
			case 0xF4:
				upper = 0x8F
			}
		}
		j := i + 1
		for k := 0; k < need && j < len(b); k++ {
			if b[j] < lower || b[j] > upper {
				break
			}
			lower, upper = 0x80, 0xBF
			j++
		}
		if need > 0 && j-i == need+1 {
			out = append(out, b[i:j]...)
		} else {
			out = append(out, "\uFFFD"...)
		}
		i = j
	}
	return string(out)
}
