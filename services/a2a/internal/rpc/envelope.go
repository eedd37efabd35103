package rpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/a2aproject/a2a-go/a2a"
)

// envelope is one JSON-RPC 2.0 request object as read, before its method is looked up.
type envelope struct {
	// ID is the request's id as sent; nil when the object has no id member (a notification).
	ID     json.RawMessage
	Method string
	Params json.RawMessage
}

// notification reports whether the request has no id member: JSON-RPC 2.0 answers nothing to it.
// An id of null is a request like any other (answered with id null).
func (e envelope) notification() bool { return e.ID == nil }

// parseEnvelope reads one request object of a body that is valid JSON. Anything JSON-RPC 2.0
// calls an invalid request is an error wrapping a2a.ErrInvalidRequest: a value that is not an
// object, a member named twice, an id that is not a string, number or null, a jsonrpc other than
// the string "2.0", a method that is not a non-empty string. The envelope returned with such an
// error carries the id when it could be read (the answer echoes it), else none (id null).
func parseEnvelope(raw json.RawMessage) (envelope, error) {
	invalid := func(e envelope, why string) (envelope, error) {
		return e, fmt.Errorf("%s: %w", why, a2a.ErrInvalidRequest)
	}
	members, err := objectMembers(raw)
	if errors.Is(err, errNotObject) {
		return invalid(envelope{}, "a request is a JSON object")
	}
	if err != nil {
		// A member named twice: which id, which method was meant is anyone's guess, and two
		// parsers may guess differently (one in front of this server, say), so none is taken.
		return invalid(envelope{}, err.Error())
	}
	var e envelope
	if id, ok := members["id"]; ok {
		if !validID(id) {
			return invalid(envelope{}, "id must be a string, a number or null")
		}
		e.ID = bytes.TrimSpace(id)
	}
	var version string
	if json.Unmarshal(members["jsonrpc"], &version) != nil || version != "2.0" {
		return invalid(e, `jsonrpc must be "2.0"`)
	}
	if json.Unmarshal(members["method"], &e.Method) != nil || e.Method == "" {
		return invalid(e, "method must be a non-empty string")
	}
	e.Params = members["params"]
	return e, nil
}

// errNotObject is a JSON value that is not an object where one is required.
var errNotObject = errors.New("not a JSON object")

// objectMembers returns the members of the JSON object raw (valid JSON), or errNotObject, or an
// error naming a member that occurs twice.
func objectMembers(raw json.RawMessage) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errNotObject
	}
	out := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		name, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		if _, twice := out[name]; twice {
			return nil, fmt.Errorf("member %q occurs twice", name)
		}
		out[name] = v
	}
	return out, nil
}

// duplicateMember returns a member name that occurs twice in one object anywhere in raw (valid
// JSON), or "". Go's decoder would silently take the last; the request is refused instead.
func duplicateMember(raw json.RawMessage) string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	// Each open container: an object's member names seen so far, nil for an array.
	var stack []map[string]bool
	expectName := false
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) || err != nil {
			return ""
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				stack = append(stack, map[string]bool{})
				expectName = true
				continue
			case '[':
				stack = append(stack, nil)
			case '}', ']':
				stack = stack[:len(stack)-1]
			}
		case string:
			if expectName {
				top := stack[len(stack)-1]
				if top[v] {
					return v
				}
				top[v] = true
				expectName = false
				continue
			}
		}
		// After a value inside an object, the next token is a member name.
		expectName = len(stack) > 0 && stack[len(stack)-1] != nil && dec.More()
	}
}
