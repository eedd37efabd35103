package sse

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"unicode/utf8"
)

// reference parses a whole stream by the standard's steps, written out plainly: the Reader must
// agree with it on every valid UTF-8 input, however the input is cut into reads.
func reference(s string, maxBytes int) ([]Event, error) {
	s = strings.TrimPrefix(s, "\uFEFF")
	var (
		out            []Event
		data, typ, id  string
		hasData, typed bool
	)
	for s != "" {
		i := strings.IndexAny(s, "\r\n")
		if i < 0 {
			if len(s) > maxBytes {
				return out, ErrTooLarge
			}
			return out, io.ErrUnexpectedEOF
		}
		line := s[:i]
		if len(line) > maxBytes {
			return out, ErrTooLarge
		}
		if s[i] == '\r' && i+1 < len(s) && s[i+1] == '\n' {
			i++
		}
		s = s[i+1:]
		if line == "" {
			if hasData {
				ev := Event{ID: id, Type: "message", Data: strings.TrimSuffix(data, "\n")}
				if typ != "" {
					ev.Type = typ
				}
				out = append(out, ev)
			}
			data, typ, hasData, typed = "", "", false, false
			continue
		}
		if line[0] == ':' {
			continue
		}
		name, value, found := strings.Cut(line, ":")
		if found {
			value = strings.TrimPrefix(value, " ")
		}
		switch name {
		case "event":
			typ, typed = value, true
		case "data":
			if len(data)+len(value) > maxBytes {
				return out, ErrTooLarge
			}
			data += value + "\n"
			hasData = true
		case "id":
			if !strings.Contains(value, "\x00") {
				id = value
			}
		}
	}
	if hasData || typed {
		return out, io.ErrUnexpectedEOF
	}
	return out, io.EOF
}

// FuzzReader checks that the Reader never panics, bounds what it returns, and, on valid UTF-8,
// dispatches exactly the events and the ending the reference does, read whole or a byte at a time.
func FuzzReader(f *testing.F) {
	for _, seed := range []string{
		"", "data: x\n\n", "data\n\n", "event: e\ndata: a\ndata: b\r\n\r\n", "id: 1\r\rdata: x\r\r",
		"\uFEFFdata: x\n\n", ": c\nretry: 10\n\n", "id: a\x00b\ndata: x\n\n", "data: \xff\n\n",
		"data: a\r\n\r", "event: x\n", "data: 0123456789012345678901234567890123\n\n",
	} {
		f.Add(seed)
	}
	const limit = 32
	f.Fuzz(func(t *testing.T, s string) {
		whole, wholeErr := readAll(NewReader(strings.NewReader(s), limit))
		bytewise, bytewiseErr := readAll(NewReader(iotest.OneByteReader(strings.NewReader(s)), limit))
		if len(whole) != len(bytewise) || !errors.Is(bytewiseErr, unwrapped(wholeErr)) {
			t.Fatalf("whole read %d events (%v), byte at a time %d (%v)", len(whole), wholeErr, len(bytewise), bytewiseErr)
		}
		for i := range whole {
			if whole[i] != bytewise[i] {
				t.Fatalf("event %d: whole %+v, byte at a time %+v", i, whole[i], bytewise[i])
			}
			if len(whole[i].Data) > limit {
				t.Fatalf("event %d has %d bytes of data, over the limit of %d", i, len(whole[i].Data), limit)
			}
		}
		if !utf8.ValidString(s) {
			return
		}
		want, wantErr := reference(s, limit)
		if !errors.Is(wholeErr, wantErr) {
			t.Fatalf("ended with %v, the reference with %v", wholeErr, wantErr)
		}
		if len(want) != len(whole) {
			t.Fatalf("%d events, the reference %d: %+v, %+v", len(whole), len(want), whole, want)
		}
		for i := range want {
			if want[i] != whole[i] {
				t.Fatalf("event %d: %+v, the reference %+v", i, whole[i], want[i])
			}
		}
	})
}

// unwrapped returns the sentinel an error of Next stands for.
func unwrapped(err error) error {
	if errors.Is(err, ErrTooLarge) {
		return ErrTooLarge
	}
	return err
}
