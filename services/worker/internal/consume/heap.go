package consume

// readyHeap orders a partition's ready sessions by their head record's offset, so the turn that has
// waited longest starts first: a session whose turn just finished has its next turn in line by
// when that turn was accepted, not behind every session that became ready meanwhile. That keeps
// the oldest startable turn's wait (the backlog age) as short as the backlog allows.
//
// It is a binary min-heap on offset, written out on the typed slice: container/heap takes and returns
// its elements as interfaces, two allocations a turn.
type readyHeap []readySession

// push adds r.
func (h *readyHeap) push(r readySession) {
	*h = append(*h, r)
	s := *h
	for i := len(s) - 1; i > 0; {
		parent := (i - 1) / 2
		if s[parent].offset <= s[i].offset {
			break
		}
		s[parent], s[i] = s[i], s[parent]
		i = parent
	}
}

// pop removes and returns the session with the lowest offset. The heap must not be empty.
func (h *readyHeap) pop() readySession {
	s := *h
	top, n := s[0], len(s)-1
	s[0], s[n] = s[n], readySession{}
	s = s[:n]
	for i := 0; ; {
		least := i
		if l := 2*i + 1; l < n && s[l].offset < s[least].offset {
			least = l
		}
		if r := 2*i + 2; r < n && s[r].offset < s[least].offset {
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
