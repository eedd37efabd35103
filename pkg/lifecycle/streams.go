package lifecycle

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// Streams tracks a server's open long-lived streams, as net/http's Server tracks its connections
// for Shutdown: a handler tracks each stream it opens until the stream has ended; Drain tells every
// open stream to end, and every stream tracked after it at once, so its client reconnects to
// another replica; Cut tells the streams open now to end while new ones are still served, so their
// clients reconnect here; Wait waits until every tracked stream was released. How a stream ends —
// with a retry hint, without an end event, by aborting the connection — is its handler's: what the
// client needs to reconnect and resume.
//
// A handler embeds Streams, which gives it Drain, Cut, Wait and Len. The zero value tracks streams
// and drains them all at once.
type Streams struct {
	// DrainBatch streams are told to end at once when draining, DrainInterval (jittered) apart, in
	// random order, so their clients do not all reconnect to the other replicas at the same moment.
	// Zero tells every stream at once.
	DrainBatch    int
	DrainInterval time.Duration

	mu       sync.Mutex
	open     map[*Stream]struct{}
	draining bool
	running  sync.WaitGroup // tracked streams not yet released
}

// Stream is one tracked stream. Its handler watches Done, or passes Track a function that makes it
// look, and calls Release once the stream has ended.
type Stream struct {
	t      *Streams
	stop   chan struct{}
	once   sync.Once
	onStop func()
}

// Track starts tracking a stream. onStop, if not nil, is called once when the stream is told to end
// (after Done is closed), from the goroutine of Drain or Cut or, when draining has begun, from Track
// itself before it returns: it is how a stream that is not watching Done learns of it, and must not
// block.
func (t *Streams) Track(onStop func()) *Stream {
	s := &Stream{t: t, stop: make(chan struct{}), onStop: onStop}
	t.mu.Lock()
	if t.open == nil {
		t.open = map[*Stream]struct{}{}
	}
	t.open[s] = struct{}{}
	t.running.Add(1)
	draining := t.draining
	t.mu.Unlock()
	if draining {
		s.end()
	}
	return s
}

// Done is closed when the stream is told to end.
func (s *Stream) Done() <-chan struct{} { return s.stop }

// Release stops tracking the stream; call it once, when the stream has ended.
func (s *Stream) Release() {
	s.t.mu.Lock()
	delete(s.t.open, s)
	s.t.mu.Unlock()
	s.t.running.Done()
}

func (s *Stream) end() {
	s.once.Do(func() {
		close(s.stop)
		if s.onStop != nil {
			s.onStop()
		}
	})
}

// Len counts the tracked streams.
func (t *Streams) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.open)
}

// Draining reports whether Drain was called: streams tracked from now on end at once.
func (t *Streams) Draining() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.draining
}

// Drain tells every open stream to end, in batches when DrainBatch is set, and makes every stream
// tracked from now on end at once. It returns when every stream open at the call was told, or when
// ctx ends, and then tells the rest at once: the shutdown deadline is worth more than the spread.
// It does not wait for the streams to end; Wait does.
func (t *Streams) Drain(ctx context.Context) {
	t.mu.Lock()
	t.draining = true
	open := t.snapshot()
	t.mu.Unlock()
	batch := t.DrainBatch
	if batch <= 0 {
		batch = len(open)
	}
	rand.Shuffle(len(open), func(i, j int) { open[i], open[j] = open[j], open[i] }) //nolint:gosec // spreads reconnects; nothing secret depends on the order
	for i := 0; i < len(open); i += batch {
		if i > 0 && t.DrainInterval > 0 {
			// Jittered around DrainInterval, from half of it to one and a half.
			tm := time.NewTimer(t.DrainInterval/2 + rand.N(t.DrainInterval)) //nolint:gosec // jitter needs no cryptographic randomness
			select {
			case <-tm.C:
			case <-ctx.Done():
				tm.Stop()
				batch = len(open) - i
			}
		}
		for _, s := range open[i:min(i+batch, len(open))] {
			s.end()
		}
	}
}

// Cut tells every open stream to end, without draining: streams tracked afterwards are served, so
// the clients reconnect to this replica. Tests use it to cut streams mid-turn.
func (t *Streams) Cut() {
	t.mu.Lock()
	open := t.snapshot()
	t.mu.Unlock()
	for _, s := range open {
		s.end()
	}
}

func (t *Streams) snapshot() []*Stream {
	open := make([]*Stream, 0, len(t.open))
	for s := range t.open {
		open = append(open, s)
	}
	return open
}

// Wait blocks until every tracked stream was released, or ctx ends. A stream whose handler has
// returned may still run (a taken-over connection), so a server's Shutdown does not wait for it:
// call Drain, then Wait.
func (t *Streams) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { t.running.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for streams to end: %w", context.Cause(ctx))
	}
}
