package uistream

import (
	"fmt"
	"strconv"
	"strings"
)

// Cursor is a client's resume position: the native SSE id `<epoch>:<ms>-<seq>` of the last event
// it has the parts of. The zero Cursor covers nothing.
type Cursor struct {
	epoch   string
	ms, seq uint64
	set     bool
}

// ParseCursor reads a Last-Event-ID; empty means no cursor.
func ParseCursor(id string) (Cursor, error) {
	if id == "" {
		return Cursor{}, nil
	}
	epoch, ms, seq, err := splitID(id)
	if err != nil {
		return Cursor{}, err
	}
	return Cursor{epoch: epoch, ms: ms, seq: seq, set: true}, nil
}

// Covers reports whether the event with native id is at or before the cursor, so the client
// already has its parts. An event of another epoch is never covered: the cursor names a stream
// generation that is gone, and the client gets the turn again from its start.
func (c Cursor) Covers(id string) bool {
	if !c.set {
		return false
	}
	epoch, ms, seq, err := splitID(id)
	if err != nil || epoch != c.epoch {
		return false
	}
	return ms < c.ms || (ms == c.ms && seq <= c.seq)
}

func splitID(id string) (epoch string, ms, seq uint64, err error) {
	epoch, entry, ok := strings.Cut(id, ":")
	if !ok || epoch == "" {
		return "", 0, 0, fmt.Errorf("event id %q is not <epoch>:<entry id>", id)
	}
	a, b, ok := strings.Cut(entry, "-")
	if !ok {
		return "", 0, 0, fmt.Errorf("event id %q is not <epoch>:<ms>-<seq>", id)
	}
	if ms, err = strconv.ParseUint(a, 10, 64); err == nil {
		seq, err = strconv.ParseUint(b, 10, 64)
	}
	if err != nil {
		return "", 0, 0, fmt.Errorf("event id %q is not <epoch>:<ms>-<seq>", id)
	}
	return epoch, ms, seq, nil
}
