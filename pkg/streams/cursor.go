package streams

import (
	"errors"
	"strconv"
	"strings"
)

// ErrBadCursor is returned for a Last-Event-ID that is not "<epoch>:<ms>-<seq>".
var ErrBadCursor = errors.New("malformed event id")

// EntryID is a Redis stream entry ID.
type EntryID struct {
	Ms  uint64
	Seq uint64
}

// ParseEntryID parses "<ms>-<seq>".
func ParseEntryID(s string) (EntryID, error) {
	ms, seq, ok := strings.Cut(s, "-")
	if !ok {
		return EntryID{}, ErrBadCursor
	}
	m, err := strconv.ParseUint(ms, 10, 64)
	if err != nil || (len(ms) > 1 && ms[0] == '0') {
		return EntryID{}, ErrBadCursor
	}
	q, err := strconv.ParseUint(seq, 10, 64)
	if err != nil || (len(seq) > 1 && seq[0] == '0') {
		return EntryID{}, ErrBadCursor
	}
	return EntryID{Ms: m, Seq: q}, nil
}

func (e EntryID) String() string {
	return strconv.FormatUint(e.Ms, 10) + "-" + strconv.FormatUint(e.Seq, 10)
}

// Less orders entry IDs as Redis does.
func (e EntryID) Less(o EntryID) bool {
	return e.Ms < o.Ms || (e.Ms == o.Ms && e.Seq < o.Seq)
}

// IsZero reports whether e is 0-0, the ID before every entry.
func (e EntryID) IsZero() bool { return e.Ms == 0 && e.Seq == 0 }

// Cursor is a position in one generation of a session stream: the SSE event ID.
type Cursor struct {
	Epoch string
	ID    EntryID
}

// maxEpochLen bounds the epoch part; epochs the publisher mints are far shorter.
const maxEpochLen = 32

// ParseCursor parses "<epoch>:<ms>-<seq>". The epoch is 1–32 characters of [a-z0-9].
func ParseCursor(s string) (Cursor, error) {
	epoch, id, ok := strings.Cut(s, ":")
	if !ok || epoch == "" || len(epoch) > maxEpochLen {
		return Cursor{}, ErrBadCursor
	}
	for i := 0; i < len(epoch); i++ {
		c := epoch[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return Cursor{}, ErrBadCursor
		}
	}
	e, err := ParseEntryID(id)
	if err != nil {
		return Cursor{}, err
	}
	return Cursor{Epoch: epoch, ID: e}, nil
}

func (c Cursor) String() string { return c.Epoch + ":" + c.ID.String() }
