package streams

// Keys names the Redis keys of one session.
type Keys struct {
	Events string
	Meta   string
	Notify string
}

// KeysFor returns the keys of a session under prefix. The session ID is the hash tag, so all three
// map to one cluster slot and the publish script can touch them together.
func KeysFor(prefix, sessionID string) Keys {
	base := prefix + ":s:{" + sessionID + "}:"
	return Keys{Events: base + "events", Meta: base + "meta", Notify: base + "notify"}
}
