package park

import (
	"sync"
	"time"
)

// The keep-alive wheel ticks about every wheelTick, with at most wheelMaxSlots slots: at a 15 s
// keep-alive, 256 slots 59 ms apart, so 20,000 streams' keep-alives come 78 at a time rather than
// in a few large bursts that would hold up live deliveries behind them.
const (
	wheelTick     = 50 * time.Millisecond
	wheelMaxSlots = 256
)

// wheel spreads keep-alives: a stream joins the slot the hand has just left, so its first
// keep-alive comes one interval after it went live, and every interval after that.
type wheel struct {
	tick  time.Duration
	mu    sync.Mutex
	hand  int
	slots []map[*Stream]struct{}
}

func (w *wheel) init(keepAlive time.Duration) {
	n := min(max(int(keepAlive/wheelTick), 1), wheelMaxSlots)
	w.tick = max(keepAlive/time.Duration(n), time.Millisecond)
	w.slots = make([]map[*Stream]struct{}, n)
	for i := range w.slots {
		w.slots[i] = map[*Stream]struct{}{}
	}
}

func (w *wheel) add(s *Stream) {
	w.mu.Lock()
	s.slot = w.hand
	w.slots[s.slot][s] = struct{}{}
	w.mu.Unlock()
}

func (w *wheel) remove(s *Stream) {
	w.mu.Lock()
	delete(w.slots[s.slot], s)
	w.mu.Unlock()
}

// advance moves the hand one slot and appends that slot's streams to due.
func (w *wheel) advance(due []*Stream) []*Stream {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.hand = (w.hand + 1) % len(w.slots)
	for s := range w.slots[w.hand] {
		due = append(due, s)
	}
	return due
}

// chosen appends to due the streams whose tags pick chooses.
func (w *wheel) chosen(due []*Stream, pick func(tag string) bool) []*Stream {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, slot := range w.slots {
		for s := range slot {
			if s.tag != "" && pick(s.tag) {
				due = append(due, s)
			}
		}
	}
	return due
}
