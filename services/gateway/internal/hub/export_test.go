package hub

// Queued counts the feeds waiting in the queue for a reader.
func (h *Hub) Queued() int {
	h.woken.mu.Lock()
	defer h.woken.mu.Unlock()
	return len(h.woken.feeds)
}

// Quiet says every feed's subscription was confirmed (confirmations of them all dispatched), no
// feed waits in the queue and none is being read: nothing the subscriptions caused is still to come.
func (h *Hub) Quiet(feeds int) bool {
	if h.confirmed.Load() < int64(feeds) {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.woken.mu.Lock()
	defer h.woken.mu.Unlock()
	if len(h.woken.feeds) > 0 {
		return false
	}
	for _, f := range h.feeds {
		if f.reading || f.queued {
			return false
		}
	}
	return true
}
