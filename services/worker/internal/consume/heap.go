package consume

// readyHeap orders a tenant's ready sessions of one partition by their head record's priority,
// highest first, then by its offset, so among equals the turn that has waited longest starts first: a session whose turn just finished has its next turn in line by
// when that turn was accepted, not behind every session that became ready meanwhile. That keeps
// the oldest startable turn's wait (the backlog age) as short as the backlog allows.
//
// It is a binary heap on (priority, offset), written out on the typed slice: container/heap takes and returns
// its elements as interfaces, two allocations a turn.
type readyHeap []readySession

// push adds r.
func (h *readyHeap) push(r readySession) {
	*h = append(*h, r)
	s := *h
	for i := len(s) - 1; i > 0; {
		parent := (i - 1) / 2
		if !s[i].before(s[parent]) {
			break
		}
		s[parent], s[i] = s[i], s[parent]
		i = parent
	}
}

// pop removes and returns the session that goes first. The heap must not be empty.
func (h *readyHeap) pop() readySession {
	s := *h
	top, n := s[0], len(s)-1
	s[0], s[n] = s[n], readySession{}
	s = s[:n]
	for i := 0; ; {
		least := i
		if l := 2*i + 1; l < n && s[l].before(s[least]) {
			least = l
		}
		if r := 2*i + 2; r < n && s[r].before(s[least]) {
			least = r
		}
		if least == i {
			break
		}
		s[i], s[least] = s[least], s[i]
		i = least
	}
	*h = s
	return top
}

// before reports whether r goes before o: a higher priority, or an equal one and a lower offset.
func (r readySession) before(o readySession) bool {
	if r.prio != o.prio {
		return r.prio > o.prio
	}
	return r.offset < o.offset
}
