package region

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/google/uuid"
)

// Separator joins a region code and the rest of an ID.
const Separator = "-"

// CodePattern is the shape of a region code, for documents and other packages' patterns.
const CodePattern = `[a-z][a-z0-9]{1,7}`

var codeRE = regexp.MustCompile(`^` + CodePattern + `$`)

// ErrInvalidCode is a region code outside [a-z][a-z0-9]{1,7}.
var ErrInvalidCode = errors.New("region code must be 2-8 characters of [a-z][a-z0-9]{1,7}")

// ValidCode reports whether code is a well-formed region code.
func ValidCode(code string) bool { return codeRE.MatchString(code) }

// Prefix returns rest as region's ID: "<region>-<rest>", or rest itself when region is empty
// (single-region mode).
func Prefix(region, rest string) string {
	if region == "" {
		return rest
	}
	return region + Separator + rest
}

// NewID mints a time-ordered ID of region: its prefix and a UUIDv7 (a bare UUIDv7 without a
// region).
func NewID(region string) string {
	return Prefix(region, uuid.Must(uuid.NewV7()).String())
}

// Split reads the region code an ID starts with: the text before its first "-", when that text is a
// well-formed code. It says nothing of whether such a region exists (Map.Owner does), and a bare
// UUID whose first group happens to look like a code splits too; ParseUUID tells the two apart.
func Split(id string) (code, rest string, ok bool) {
	code, rest, found := strings.Cut(id, Separator)
	if !found || !ValidCode(code) {
		return "", id, false
	}
	return code, rest, true
}

// ParseUUID parses a UUID-based ID in either form a region accepts: a bare UUID (code is empty)
// or "<code>-<uuid>" with the UUID in its canonical 36-character form. Whether the code is the
// caller's own region is the caller's check (Local.Minted).
func ParseUUID(id string) (code string, u uuid.UUID, err error) {
	// No prefixed form is a UUID text: a "<code>-" prefix makes it 39-45 characters that neither
	// start with "urn:uuid:" nor "{", the only UUID forms of those lengths.
	if u, err := uuid.Parse(id); err == nil {
		return "", u, nil
	}
	code, rest, ok := Split(id)
	if !ok || len(rest) != 36 {
		return "", uuid.Nil, fmt.Errorf("%q is neither a UUID nor <region>-<uuid>", id)
	}
	u, err = uuid.Parse(rest)
	if err != nil {
		return "", uuid.Nil, fmt.Errorf("%q is neither a UUID nor <region>-<uuid>: %w", id, err)
	}
	return code, u, nil
}

// Local is what a region knows of regions when it is sent an ID: its own code and, when one is
// configured, the map. The zero Local is single-region mode, where nothing is misdirected.
type Local struct {
	// Code is TURNSTILE_REGION; empty is single-region mode.
	Code string
	// Map is the region map, nil when none is configured.
	Map *Map
}

// Minted reports whether an ID of a kind only turnstile mints (turn, task, run IDs) belongs to
// another region, and which: a well-formed code other than ours followed by a UUID. It is a pure
// function of the text, so a route checks it before any store access.
func (l Local) Minted(id string) (owner string, misdirected bool) {
	if l.Code == "" {
		return "", false
	}
	code, _, err := ParseUUID(id)
	if err != nil || code == "" || code == l.Code {
		return "", false
	}
	return code, true
}

// Misdirected reports whether a request naming the client-choosable ID chosen (a session, thread
// or context; may be empty) and the minted ID minted (a turn, task or run; may be empty) belongs
// to another region, and which: Chosen, then Minted.
func (l Local) Misdirected(chosen, minted string) (owner string, misdirected bool) {
	if owner, ok := l.Chosen(chosen); ok {
		return owner, true
	}
	return l.Minted(minted)
}

// Chosen reports whether an ID a client may choose (session, thread, context IDs) belongs to
// another region: its prefix is a region of the map other than ours. Without a map no client
// choice is ever foreign.
func (l Local) Chosen(id string) (owner string, misdirected bool) {
	if l.Code == "" || l.Map == nil {
		return "", false
	}
	code, ok := l.Map.Owner(id)
	if !ok || code == l.Code {
		return "", false
	}
	return code, true
}
