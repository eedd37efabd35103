package batch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/turnstile-run/turnstile/pkg/lifecycle"
)

// ErrNotRunning is returned by Do before Start and after Stop.
var ErrNotRunning = errors.New("batcher not running")

// Result is one request's outcome.
type Result[Res any] struct {
	Val Res
	Err error
}

// Func runs one batch and returns exactly one result per request, in request order. A failure of the
// whole batch is reported by setting every result's Err (see Fail).
type Func[Req, Res any] func(ctx context.Context, reqs []Req) []Result[Res]

// Do runs fn for req alone, in the caller's goroutine: one round trip per call, as a Batcher would
// with no other caller and no lifecycle. With it a Func has a Batcher's Do, so a caller that sends
// one request at a time takes either (a lease store's ClaimMany unbatched, a test's fake).
func (fn Func[Req, Res]) Do(ctx context.Context, req Req) (Res, error) {
	res := fn(ctx, []Req{req})
	if len(res) != 1 {
		var zero Res
		return zero, fmt.Errorf("batch returned %d results for 1 request", len(res))
	}
	return res[0].Val, res[0].Err
}

// Fail returns n results that all carry err.
func Fail[Res any](n int, err error) []Result[Res] {
	out := make([]Result[Res], n)
	for i := range out {
		out[i].Err = err
	}
	return out
}

// Defaults.
const (
	MaxBatchDefault = 256
	FlushersDefault = 1
	TimeoutDefault  = 10 * time.Second
)

// Config tunes a Batcher. Zero values mean defaults.
type Config[Req, Res any] struct {
	// Name names the batcher in errors.
	Name string
	// MaxBatch bounds the requests run together. Defaults to MaxBatchDefault (256).
	MaxBatch int
	// Flushers is how many batches may be in flight at once. One gives classic group commit: while
	// a batch runs, the next one gathers. Defaults to FlushersDefault (1).
	Flushers int
	// Timeout bounds one batch. Defaults to TimeoutDefault (10s).
	Timeout time.Duration
	// Abandoned, if set, receives the requests whose callers gave up (their context ended) after
	// the batch had been sent, with what the batch did for them: a claim that acquired a lease nobody
	// will run, for example, can be released. It runs on the flusher, with the flusher's context
	// (cancelled by Stop): it must be quick.
	Abandoned func(ctx context.Context, req Req, res Result[Res])
	// OnBatch, if set, is called after every batch with its size and duration (metrics, tests). It
	// must be fast and safe for concurrent use.
	OnBatch func(n int, took time.Duration)
}

// Batcher runs the requests of concurrent callers together: group commit. Each flusher waits for a
// first request, takes every request queued behind it (up to MaxBatch), runs them as one batch and
// hands each caller its own result; requests that arrive meanwhile form the next batch. Nothing
// waits on a timer: at low load a request is sent at once, alone; under load batches grow by
// themselves, to what arrived during the previous round trip. Safe for concurrent use.
type Batcher[Req, Res any] struct {
	cfg   Config[Req, Res]
	fn    Func[Req, Res]
	queue chan *call[Req, Res]

	mu      sync.RWMutex
	running bool
	loop    lifecycle.Loop
	// busy counts the flushers running a batch.
	busy atomic.Int32
}

// call states.
const (
	pending   int32 = iota // queued, not yet taken into a batch
	sent                   // in a batch
	gone                   // the caller gave up
	delivered              // the result is in
)

type call[Req, Res any] struct {
	req   Req
	res   Result[Res]
	state atomic.Int32
	done  chan struct{}
}

// New returns a batcher that runs batches with fn.
func New[Req, Res any](cfg Config[Req, Res], fn Func[Req, Res]) *Batcher[Req, Res] {
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = MaxBatchDefault
	}
	if cfg.Flushers <= 0 {
		cfg.Flushers = FlushersDefault
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = TimeoutDefault
	}
	if cfg.Name == "" {
		cfg.Name = "batcher"
	}
	return &Batcher[Req, Res]{cfg: cfg, fn: fn, queue: make(chan *call[Req, Res], 2*cfg.MaxBatch*cfg.Flushers)}
}

// Do queues req and waits for its result. When ctx ends first it returns ctx's cause; the request is
// then dropped if it was not sent yet, and handed to Config.Abandoned once its batch returns if it was.
func (b *Batcher[Req, Res]) Do(ctx context.Context, req Req) (Res, error) {
	var zero Res
	if err := ctx.Err(); err != nil {
		return zero, context.Cause(ctx)
	}
	c := &call[Req, Res]{req: req, done: make(chan struct{})}
	b.mu.RLock()
	if !b.running {
		b.mu.RUnlock()
		return zero, fmt.Errorf("%s: %w", b.cfg.Name, ErrNotRunning)
	}
	select {
	case b.queue <- c:
	case <-ctx.Done():
		b.mu.RUnlock()
		return zero, context.Cause(ctx)
	}
	b.mu.RUnlock()
	select {
	case <-c.done:
		return c.res.Val, c.res.Err
	case <-ctx.Done():
		if c.state.CompareAndSwap(pending, gone) || c.state.CompareAndSwap(sent, gone) {
			return zero, context.Cause(ctx)
		}
		<-c.done // delivered just now: the result wins
		return c.res.Val, c.res.Err
	}
}

// Idle reports whether a request given now would be sent at once, alone or with others given at
// the same moment: a flusher is free and nothing is queued. It is a snapshot, for callers that
// choose between sending a request now and folding it into a later one (the worker's execute
// package publishes a quick turn's first events at once only while the publish batcher is idle).
func (b *Batcher[Req, Res]) Idle() bool {
	return len(b.queue) == 0 && int(b.busy.Load()) < b.cfg.Flushers
}

// Start starts the flushers. Starting a running batcher does nothing.
func (b *Batcher[Req, Res]) Start(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.running = true
	b.loop.Start(ctx, func(ctx context.Context) {
		var wg sync.WaitGroup
		for range b.cfg.Flushers {
			wg.Go(func() { b.flush(ctx) })
		}
		wg.Wait()
	})
	return nil
}

// Stop refuses new requests, stops the flushers (a batch in flight is cancelled, and its callers get
// the error) and fails every request still queued with ErrNotRunning. Safe twice and before Start.
func (b *Batcher[Req, Res]) Stop(ctx context.Context) error {
	b.mu.Lock()
	b.running = false // from here on no request joins the queue
	b.mu.Unlock()
	err := b.loop.Stop(ctx, b.cfg.Name)
	for {
		select {
		case c := <-b.queue:
			b.deliver(ctx, c, Result[Res]{Err: fmt.Errorf("%s: %w", b.cfg.Name, ErrNotRunning)}, true)
		default:
			return err
		}
	}
}

func (b *Batcher[Req, Res]) flush(ctx context.Context) {
	calls := make([]*call[Req, Res], 0, b.cfg.MaxBatch)
	reqs := make([]Req, 0, b.cfg.MaxBatch)
	for {
		calls, reqs = calls[:0], reqs[:0]
		if ctx.Err() != nil {
			return // stopping: what is still queued is failed by Stop, not sent
		}
		select {
		case <-ctx.Done():
			return
		case c := <-b.queue:
			if c.state.CompareAndSwap(pending, sent) {
				calls = append(calls, c)
			}
		}
	gather:
		for len(calls) < b.cfg.MaxBatch {
			select {
			case c := <-b.queue:
				if c.state.CompareAndSwap(pending, sent) {
					calls = append(calls, c)
				}
			default:
				break gather
			}
		}
		if len(calls) == 0 {
			continue
		}
		for _, c := range calls {
			reqs = append(reqs, c.req)
		}
		start := time.Now()
		b.busy.Add(1)
		bctx, cancel := context.WithTimeout(ctx, b.cfg.Timeout)
		res := b.fn(bctx, reqs)
		cancel()
		b.busy.Add(-1)
		if len(res) != len(calls) {
			res = Fail[Res](len(calls), fmt.Errorf("%s: batch returned %d results for %d requests", b.cfg.Name, len(res), len(calls)))
		}
		for i, c := range calls {
			b.deliver(ctx, c, res[i], false)
		}
		if b.cfg.OnBatch != nil {
			b.cfg.OnBatch(len(calls), time.Since(start))
		}
		clear(calls) // drop references for the collector
		clear(reqs)
	}
}

// deliver hands res to the caller, or to Config.Abandoned when the caller has gone. unsent marks a
// call that never joined a batch.
func (b *Batcher[Req, Res]) deliver(ctx context.Context, c *call[Req, Res], res Result[Res], unsent bool) {
	c.res = res
	from := sent
	if unsent {
		from = pending
	}
	if c.state.CompareAndSwap(from, delivered) {
		close(c.done)
		return
	}
	if !unsent && b.cfg.Abandoned != nil {
		b.cfg.Abandoned(ctx, c.req, res)
	}
}
