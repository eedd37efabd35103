package offsets

import "sort"

// Tracker is one partition's outstanding records. Not safe for concurrent use; the consumer loop
// owns it.
type Tracker struct {
	// pending holds offsets in the order added (ascending); done marks finished ones not yet popped.
	pending []entry
	// next is the offset to commit when nothing is pending: one past the newest record seen.
	next int64
	// committed is the last commit point handed out by Commit, or -1.
	committed int64
}

type entry struct {
	offset int64
	done   bool
}

// New returns a tracker for a partition whose consumption resumes at start, or -1 when that is not
// known yet: then nothing is committed before the first record arrives.
func New(start int64) *Tracker { return &Tracker{next: start, committed: -1} }

// Add records a fetched record. Offsets must be added in ascending order; an offset at or below one
// already added is ignored (a re-fetch after a seek).
func (t *Tracker) Add(offset int64) bool {
	if n := len(t.pending); (n > 0 && offset <= t.pending[n-1].offset) || (t.next >= 0 && offset < t.next) {
		return false
	}
	t.pending = append(t.pending, entry{offset: offset})
	t.next = offset + 1
	return true
}

// Done marks a record finished. Unknown offsets are ignored.
func (t *Tracker) Done(offset int64) {
	i := sort.Search(len(t.pending), func(i int) bool { return t.pending[i].offset >= offset })
	if i == len(t.pending) || t.pending[i].offset != offset {
		return
	}
	t.pending[i].done = true
	j := 0
	for j < len(t.pending) && t.pending[j].done {
		j++
	}
	if j > 0 {
		t.pending = append(t.pending[:0], t.pending[j:]...)
	}
}

// CommitPoint is the offset to commit: the lowest unfinished record, or one past the newest record
// when all are finished. Everything below it is finished.
func (t *Tracker) CommitPoint() int64 {
	if len(t.pending) > 0 {
		return t.pending[0].offset
	}
	return t.next
}

// Commit returns the commit point and whether it moved since the last Commit. An unknown start
// (no record seen yet) never moves.
func (t *Tracker) Commit() (int64, bool) {
	p := t.CommitPoint()
	if p < 0 || p == t.committed {
		return p, false
	}
	t.committed = p
	return p, true
}

// ForgetCommit makes the next Commit report the commit point as moved (after a failed commit).
func (t *Tracker) ForgetCommit() { t.committed = -1 }

// Outstanding counts records added and not finished.
func (t *Tracker) Outstanding() int {
	n := 0
	for _, e := range t.pending {
		if !e.done {
			n++
		}
	}
	return n
}
