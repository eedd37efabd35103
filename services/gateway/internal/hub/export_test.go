package hub

// Queued counts the feeds waiting in the queue for a reader.
func (h *Hub) Queued() int {
	h.woken.mu.Lock()
	defer h.woken.mu.Unlock()
	return len(h.woken.feeds)
}
