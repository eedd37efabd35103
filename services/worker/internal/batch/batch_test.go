package batch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/turnstile-run/turnstile/pkg/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitTimeout bounds every wait on a signal; generous, so a slow machine does not fail a test.
const waitTimeout = 10 * time.Second

// gate is a batch function that reports every batch it is given and then blocks until released,
// so a test decides exactly when each batch returns.
type gate struct {
	batches chan []int
	release chan func(reqs []int) []Result[int]
}

func newGate() *gate {
	return &gate{batches: make(chan []int, 100), release: make(chan func([]int) []Result[int], 100)}
}

func (g *gate) fn(ctx context.Context, reqs []int) []Result[int] {
	g.batches <- append([]int(nil), reqs...)
	select {
	case f := <-g.release:
		return f(reqs)
	case <-ctx.Done():
		return Fail[int](len(reqs), ctx.Err())
	}
}

func (g *gate) next(t *testing.T) []int {
	t.Helper()
	select {
	case b := <-g.batches:
		return b
	case <-time.After(waitTimeout):
		t.Fatal("no batch arrived")
		return nil
	}
}

// double answers every request with twice its value.
func double(reqs []int) []Result[int] {
	out := make([]Result[int], len(reqs))
	for i, r := range reqs {
		out[i].Val = 2 * r
	}
	return out
}

type outcome struct {
	req, val int
	err      error
}

// doAsync runs b.Do in a goroutine the test waits for, and returns where the outcome arrives.
func doAsync(ctx context.Context, t *testing.T, wg *sync.WaitGroup, b *Batcher[int, int], req int) <-chan outcome {
	t.Helper()
	ch := make(chan outcome, 1)
	wg.Go(func() {
		v, err := b.Do(ctx, req)
		ch <- outcome{req, v, err}
	})
	return ch
}

func recv(t *testing.T, ch <-chan outcome) outcome {
	t.Helper()
	select {
	case o := <-ch:
		return o
	case <-time.After(waitTimeout):
		t.Fatal("caller still waiting")
		return outcome{}
	}
}

// start starts b and stops it (twice, as the contract allows) when the test ends.
func start(ctx context.Context, t *testing.T, b *Batcher[int, int]) {
	t.Helper()
	require.NoError(t, b.Start(ctx))
	t.Cleanup(func() {
		require.NoError(t, b.Stop(ctx))
		require.NoError(t, b.Stop(ctx))
	})
}

// queued waits until n requests sit in b's queue.
func queued(t *testing.T, b *Batcher[int, int], n int) {
	t.Helper()
	testenv.WaitFor(t, waitTimeout, fmt.Sprintf("%d requests queued", n), func() bool { return len(b.queue) >= n })
}

func TestBatcher(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("Defaults", func(t *testing.T) {
		t.Parallel()
		b := New(Config[int, int]{}, func(context.Context, []int) []Result[int] { return nil })
		require.Equal(t, MaxBatchDefault, b.cfg.MaxBatch)
		require.Equal(t, FlushersDefault, b.cfg.Flushers)
		require.Equal(t, TimeoutDefault, b.cfg.Timeout)
	})

	t.Run("FuncDo", func(t *testing.T) {
		t.Parallel()
		var sizes []int
		fn := Func[int, int](func(_ context.Context, reqs []int) []Result[int] {
			sizes = append(sizes, len(reqs))
			out := double(reqs)
			if reqs[0] < 0 {
				out[0].Err = errors.New("negative")
			}
			return out
		})
		v, err := fn.Do(ctx, 21)
		require.NoError(t, err)
		require.Equal(t, 42, v)
		_, err = fn.Do(ctx, -1)
		require.EqualError(t, err, "negative", "the request's own error")
		require.Equal(t, []int{1, 1}, sizes, "one batch of one request per call")
		_, err = Func[int, int](func(context.Context, []int) []Result[int] { return nil }).Do(ctx, 1)
		require.ErrorContains(t, err, "0 results for 1 request")
	})

	t.Run("IdleWhileAFlusherIsFreeAndNothingWaits", func(t *testing.T) {
		t.Parallel()
		g := newGate()
		b := New(Config[int, int]{Flushers: 1}, g.fn)
		start(ctx, t, b)
		var wg sync.WaitGroup
		defer wg.Wait()
		require.True(t, b.Idle())
		first := doAsync(ctx, t, &wg, b, 1)
		require.Equal(t, []int{1}, g.next(t))
		require.False(t, b.Idle(), "the only flusher runs a batch")
		second := doAsync(ctx, t, &wg, b, 2)
		queued(t, b, 1)
		require.False(t, b.Idle())
		g.release <- double
		require.Equal(t, 2, recv(t, first).val)
		require.Equal(t, []int{2}, g.next(t))
		g.release <- double
		require.Equal(t, 4, recv(t, second).val)
		require.True(t, b.Idle(), "the batch is done and nothing is queued")
	})

	t.Run("GroupCommit", func(t *testing.T) {
		t.Parallel()
		g := newGate()
		sizes := make(chan int, 10)
		b := New(Config[int, int]{MaxBatch: 3, OnBatch: func(n int, _ time.Duration) { sizes <- n }}, g.fn)
		start(ctx, t, b)
		var wg sync.WaitGroup
		defer wg.Wait()

		// A lone request goes out at once, alone: no timer holds it back.
		first := doAsync(ctx, t, &wg, b, 1)
		require.Equal(t, []int{1}, g.next(t))
		// While it is in flight, five more arrive; they wait for it, then leave as batches of at
		// most MaxBatch, in arrival order.
		var rest []<-chan outcome
		for i := 2; i <= 6; i++ {
			rest = append(rest, doAsync(ctx, t, &wg, b, i))
			queued(t, b, i-1)
		}
		g.release <- double
		require.Equal(t, outcome{1, 2, nil}, recv(t, first))
		require.Equal(t, []int{2, 3, 4}, g.next(t))
		g.release <- double
		require.Equal(t, []int{5, 6}, g.next(t))
		g.release <- double
		for i, ch := range rest {
			require.Equal(t, outcome{i + 2, 2 * (i + 2), nil}, recv(t, ch), "each caller gets its own result")
		}
		require.Equal(t, []int{1, 3, 2}, []int{<-sizes, <-sizes, <-sizes})
	})

	t.Run("PerRequestErrors", func(t *testing.T) {
		t.Parallel()
		errOdd := errors.New("odd")
		b := New(Config[int, int]{}, func(_ context.Context, reqs []int) []Result[int] {
			out := double(reqs)
			for i, r := range reqs {
				if r%2 == 1 {
					out[i] = Result[int]{Err: errOdd}
				}
			}
			return out
		})
		start(ctx, t, b)
		var wg sync.WaitGroup
		var chs []<-chan outcome
		for i := range 20 {
			chs = append(chs, doAsync(ctx, t, &wg, b, i))
		}
		for i, ch := range chs {
			o := recv(t, ch)
			if i%2 == 1 {
				require.ErrorIs(t, o.err, errOdd)
			} else {
				require.NoError(t, o.err)
				require.Equal(t, 2*i, o.val)
			}
		}
		wg.Wait()
	})

	t.Run("WholeBatchFails", func(t *testing.T) {
		t.Parallel()
		g := newGate()
		b := New(Config[int, int]{}, g.fn)
		start(ctx, t, b)
		var wg sync.WaitGroup
		defer wg.Wait()
		first := doAsync(ctx, t, &wg, b, 0)
		g.next(t)
		var chs []<-chan outcome
		for i := 1; i <= 4; i++ {
			chs = append(chs, doAsync(ctx, t, &wg, b, i))
			queued(t, b, i)
		}
		g.release <- double
		recv(t, first)
		require.Len(t, g.next(t), 4)
		boom := errors.New("connection reset")
		g.release <- func(reqs []int) []Result[int] { return Fail[int](len(reqs), boom) }
		for _, ch := range chs {
			require.ErrorIs(t, recv(t, ch).err, boom, "every caller of a failed batch gets its error")
		}
	})

	t.Run("WrongResultCount", func(t *testing.T) {
		t.Parallel()
		b := New(Config[int, int]{}, func(context.Context, []int) []Result[int] { return nil })
		start(ctx, t, b)
		_, err := b.Do(ctx, 1)
		require.ErrorContains(t, err, "returned 0 results for 1 requests")
	})

	t.Run("ContextBeforeSend", func(t *testing.T) {
		t.Parallel()
		g := newGate()
		abandoned := make(chan int, 10)
		b := New(Config[int, int]{Abandoned: func(_ context.Context, req int, _ Result[int]) { abandoned <- req }}, g.fn)
		start(ctx, t, b)
		var wg sync.WaitGroup
		defer wg.Wait()
		first := doAsync(ctx, t, &wg, b, 1)
		g.next(t)
		// A caller queued behind the batch in flight gives up: it returns at once with its cause,
		// and its request is never sent.
		cctx, cancel := context.WithCancelCause(ctx)
		gaveUp := doAsync(cctx, t, &wg, b, 2)
		queued(t, b, 1)
		stop := errors.New("turn drained")
		cancel(stop)
		require.ErrorIs(t, recv(t, gaveUp).err, stop)
		kept := doAsync(ctx, t, &wg, b, 3)
		queued(t, b, 2)
		g.release <- double
		recv(t, first)
		require.Equal(t, []int{3}, g.next(t), "the abandoned request is dropped")
		g.release <- double
		require.Equal(t, 6, recv(t, kept).val)
		require.Empty(t, abandoned, "nothing was done for the caller that left")

		done, cancelDone := context.WithCancel(ctx)
		cancelDone()
		_, err := b.Do(done, 4)
		require.ErrorIs(t, err, context.Canceled, "an ended context is refused before queueing")
	})

	t.Run("ContextAfterSend", func(t *testing.T) {
		t.Parallel()
		g := newGate()
		abandoned := make(chan outcome, 10)
		b := New(Config[int, int]{Abandoned: func(_ context.Context, req int, res Result[int]) { abandoned <- outcome{req, res.Val, res.Err} }}, g.fn)
		start(ctx, t, b)
		var wg sync.WaitGroup
		defer wg.Wait()
		cctx, cancel := context.WithCancel(ctx)
		gaveUp := doAsync(cctx, t, &wg, b, 7)
		require.Equal(t, []int{7}, g.next(t))
		cancel()
		require.ErrorIs(t, recv(t, gaveUp).err, context.Canceled, "the caller does not wait for its batch")
		g.release <- double
		select {
		case o := <-abandoned:
			require.Equal(t, outcome{7, 14, nil}, o, "what the batch did is handed to Abandoned")
		case <-time.After(waitTimeout):
			t.Fatal("Abandoned not called")
		}
	})

	t.Run("StopFailsWaitingCallers", func(t *testing.T) {
		t.Parallel()
		g := newGate()
		b := New(Config[int, int]{}, g.fn)
		require.NoError(t, b.Start(ctx))
		var wg sync.WaitGroup
		inFlight := doAsync(ctx, t, &wg, b, 1)
		g.next(t)
		waiting := doAsync(ctx, t, &wg, b, 2)
		queued(t, b, 1)
		require.NoError(t, b.Stop(ctx))
		require.ErrorIs(t, recv(t, inFlight).err, context.Canceled, "the batch in flight is cancelled")
		require.ErrorIs(t, recv(t, waiting).err, ErrNotRunning, "a queued request is failed, not left hanging")
		_, err := b.Do(ctx, 3)
		require.ErrorIs(t, err, ErrNotRunning)
		wg.Wait()
	})

	t.Run("NotStarted", func(t *testing.T) {
		t.Parallel()
		b := New(Config[int, int]{}, func(_ context.Context, reqs []int) []Result[int] { return double(reqs) })
		require.NoError(t, b.Stop(ctx), "stop before start")
		_, err := b.Do(ctx, 1)
		require.ErrorIs(t, err, ErrNotRunning)
		start(ctx, t, b)
		v, err := b.Do(ctx, 1)
		require.NoError(t, err)
		require.Equal(t, 2, v)
	})

	t.Run("StartStopStress", func(t *testing.T) {
		t.Parallel()
		b := New(Config[int, int]{MaxBatch: 4, Flushers: 3}, func(_ context.Context, reqs []int) []Result[int] { return double(reqs) })
		var wg sync.WaitGroup
		for range 20 {
			require.NoError(t, b.Start(ctx))
			require.NoError(t, b.Start(ctx))
			for i := range 8 {
				wg.Go(func() {
					// Either answered correctly or refused: never hung, never wrong.
					if v, err := b.Do(ctx, i); err == nil && v != 2*i {
						t.Errorf("Do(%d) = %d", i, v)
					} else if err != nil && !errors.Is(err, ErrNotRunning) {
						t.Errorf("Do(%d): %v", i, err)
					}
				})
			}
			require.NoError(t, b.Stop(ctx))
		}
		wg.Wait()
	})

	t.Run("ManyCallers", func(t *testing.T) {
		t.Parallel()
		var mu sync.Mutex
		largest := 0
		b := New(Config[int, int]{MaxBatch: 64, Flushers: 2, OnBatch: func(n int, _ time.Duration) {
			mu.Lock()
			largest = max(largest, n)
			mu.Unlock()
		}}, func(_ context.Context, reqs []int) []Result[int] { return double(reqs) })
		start(ctx, t, b)
		var wg sync.WaitGroup
		for i := range 2000 {
			wg.Go(func() {
				v, err := b.Do(ctx, i)
				if err != nil || v != 2*i {
					t.Errorf("Do(%d) = %d, %v", i, v, err)
				}
			})
		}
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		require.LessOrEqual(t, largest, 64)
	})
}
