package openai

import (
	"bytes"
	"encoding/json"
	"strings"
)

// decodeChunk decodes one chat.completion.chunk into ch as json.Unmarshal would.
//
// A streamed answer is one chunk per token, so this runs for every token of every held turn, at
// the bottom of the turn's deepest call chain. The usual chunk — choices whose delta carries
// content — is read by a flat scan of the validated text, without reflection: json.Unmarshal's
// recursive descent through chunk, choice, delta and content costs about 4 KiB of stack under that
// chain (enough to double the held turn's stack) and allocates more. Tool-call fragments, usage and
// error objects are decoded by json.Unmarshal from their own text. Anything the scan does not expect
// (a key in another case or with escapes, a value of an unexpected type) decodes the whole chunk
// with json.Unmarshal instead, so errors and odd inputs come out as they always did.
func decodeChunk(data string, ch *chunk) error {
	b := []byte(data)
	if json.Valid(b) {
		var c chunk
		if scanChunk(b, &c) {
			*ch = c
			return nil
		}
	}
	*ch = chunk{}
	return json.Unmarshal(b, ch)
}

// scanChunk reads the valid JSON text b into ch; it reports false when b is not what it reads
// (then ch is partly filled).
func scanChunk(b []byte, ch *chunk) bool {
	s := scanner{b: b}
	if s.peek() != '{' {
		return false
	}
	s.i++
	for s.more() {
		key, ok := s.key()
		if !ok {
			return false
		}
		switch {
		case string(key) == "choices":
			if !s.choices(ch) {
				return false
			}
		case string(key) == "usage":
			if json.Unmarshal(s.value(), &ch.Usage) != nil {
				return false
			}
		case string(key) == "error":
			if json.Unmarshal(s.value(), &ch.Error) != nil {
				return false
			}
		case foldsTo(key, "choices", "usage", "error"):
			return false
		default:
			s.value()
		}
	}
	return true
}

// choices reads the value of "choices": null or an array of choice objects.
func (s *scanner) choices(ch *chunk) bool {
	present, ok := s.open('[')
	if !present {
		ch.Choices = nil
		return ok
	}
	ch.Choices = make([]choice, 0, 1)
	for s.more() {
		if s.peek() != '{' {
			return false
		}
		s.i++
		ch.Choices = append(ch.Choices, choice{})
		c := &ch.Choices[len(ch.Choices)-1]
		for s.more() {
			key, ok := s.key()
			if !ok {
				return false
			}
			switch {
			case string(key) == "delta":
				if !s.delta(&c.Delta) {
					return false
				}
			case string(key) == "finish_reason":
				if !s.str(&c.FinishReason) {
					return false
				}
			case foldsTo(key, "delta", "finish_reason"):
				return false
			default:
				s.value()
			}
		}
	}
	return true
}

// delta reads the value of a choice's "delta": null or an object.
func (s *scanner) delta(d *delta) bool {
	if present, ok := s.open('{'); !present {
		return ok
	}
	for s.more() {
		key, ok := s.key()
		if !ok {
			return false
		}
		switch {
		case string(key) == "content":
			if !s.str(&d.Content) {
				return false
			}
		case string(key) == "tool_calls":
			if json.Unmarshal(s.value(), &d.ToolCalls) != nil {
				return false
			}
		case foldsTo(key, "content", "tool_calls"):
			return false
		default:
			s.value()
		}
	}
	return true
}

// foldsTo reports whether key is one of names in another case, which json.Unmarshal would match.
func foldsTo(key []byte, names ...string) bool {
	for _, n := range names {
		if len(key) == len(n) && strings.EqualFold(string(key), n) {
			return true
		}
	}
	return false
}

// scanner walks a valid JSON text.
type scanner struct {
	b []byte
	i int
}

// peek skips white space and returns the next byte (0 at the end).
func (s *scanner) peek() byte {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return s.b[s.i]
		}
	}
	return 0
}

// open moves past the opening bracket of the next value when it is want ('{' or '['): present
// reports that it was, ok that the value was that or null (then skipped).
func (s *scanner) open(want byte) (present, ok bool) {
	switch s.peek() {
	case want:
		s.i++
		return true, true
	case 'n':
		s.value()
		return false, true
	}
	return false, false
}

// more is called after an object's or array's opening bracket and after each of its members: it
// reports whether another member follows, and moves past the comma or the closing bracket.
func (s *scanner) more() bool {
	switch s.peek() {
	case ',':
		s.i++
		return true
	case '}', ']', 0:
		s.i++
		return false
	}
	return true
}

// key reads an object member's name and the colon after it. It reports false for a name with
// escapes, which the scan leaves to json.Unmarshal.
func (s *scanner) key() ([]byte, bool) {
	s.peek()
	raw := s.value()
	if len(raw) < 2 || bytes.IndexByte(raw, '\\') >= 0 {
		return nil, false
	}
	s.peek()
	s.i++ // the colon
	return raw[1 : len(raw)-1], true
}

// str reads a string or null into *dst (null leaves it as it is).
func (s *scanner) str(dst *string) bool {
	switch s.peek() {
	case 'n':
		s.value()
		return true
	case '"':
	default:
		return false
	}
	raw := s.value()
	plain := true
	for _, c := range raw[1 : len(raw)-1] {
		if c == '\\' || c >= 0x80 {
			plain = false
			break
		}
	}
	if plain {
		*dst = string(raw[1 : len(raw)-1])
		return true
	}
	// Escapes, and text that is not ASCII (json.Unmarshal replaces invalid UTF-8 with U+FFFD).
	return json.Unmarshal(raw, dst) == nil
}

// value returns the text of the next value and moves past it.
func (s *scanner) value() []byte {
	s.peek()
	start := s.i
	if s.i >= len(s.b) {
		return nil
	}
	switch s.b[s.i] {
	case '"':
		s.i = endOfString(s.b, s.i)
	case '{', '[':
		for depth := 0; s.i < len(s.b); {
			switch s.b[s.i] {
			case '"':
				s.i = endOfString(s.b, s.i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
			}
			s.i++
			if depth == 0 {
				return s.b[start:s.i]
			}
		}
	default:
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return s.b[start:s.i]
			}
			s.i++
		}
	}
	return s.b[start:s.i]
}

// endOfString returns the index just past the string that starts at b[i].
func endOfString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}
