package streams

import (
	"strings"

	"github.com/turnstile-run/turnstile/pkg/wire"
)

// Keys names the Redis keys of one session.
type Keys struct {
	Events string
	Meta   string
	Notify string
}

// KeysFor returns the keys of a session under prefix; the session's key, written as its String
// form, is the hash tag, so all three map to one cluster slot and the publish
// script can touch them together.
//
// The three names are substrings of one string built once, because the publisher names a
// session's keys for every script call.
func KeysFor(prefix string, session wire.SessionKey) Keys {
	key := session.String()
	const events, meta, notify = "events", "meta", "notify"
	baseLen := len(prefix) + len(":s:{") + len(key) + len("}:")
	var b strings.Builder
	b.Grow(3*baseLen + len(events) + len(meta) + len(notify))
	for _, suffix := range [...]string{events, meta, notify} {
		b.WriteString(prefix)
		b.WriteString(":s:{")
		b.WriteString(key)
		b.WriteString("}:")
		b.WriteString(suffix)
	}
	all := b.String()
	e := baseLen + len(events)
	m := e + baseLen + len(meta)
	return Keys{Events: all[:e], Meta: all[e:m], Notify: all[m:]}
}
