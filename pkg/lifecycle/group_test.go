package lifecycle_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/lifecycle"
	"github.com/turnstile-run/turnstile/pkg/lifecycle/lifecycletest"
)

// part is a Group child that records its starts and stops in a shared log.
type part struct {
	name     string
	log      *lifecycletest.Events
	startErr error
	// stuck makes Stop wait for release or its context.
	stuck   chan struct{}
	stopped chan struct{}
}

func newPart(name string, log *lifecycletest.Events) *part {
	return &part{name: name, log: log, stopped: make(chan struct{}, 8)}
}

func (p *part) Start(context.Context) error {
	if p.startErr != nil {
		p.log.Add("fail " + p.name)
		return p.startErr
	}
	p.log.Add("start " + p.name)
	return nil
}

func (p *part) Stop(ctx context.Context) error {
	p.log.Add("stop " + p.name)
	p.stopped <- struct{}{}
	if p.stuck != nil {
		return lifecycle.Wait(ctx, p.stuck, p.name)
	}
	return nil
}

func TestGroup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("StartsInOrderStopsInReverse", func(t *testing.T) {
		t.Parallel()
		var log lifecycletest.Events
		var g lifecycle.Group
		g.Add("a", newPart("a", &log)).Add("b", newPart("b", &log)).Add("c", newPart("c", &log))
		require.NoError(t, g.Start(ctx))
		require.NoError(t, g.Start(ctx), "a second Start does nothing")
		require.NoError(t, g.Stop(ctx))
		require.NoError(t, g.Stop(ctx), "a second Stop does nothing")
		require.Equal(t, []string{"start a", "start b", "start c", "stop c", "stop b", "stop a"}, log.List())
	})

	t.Run("FailedStartUnwinds", func(t *testing.T) {
		t.Parallel()
		var log lifecycletest.Events
		a, b, c := newPart("a", &log), newPart("b", &log), newPart("c", &log)
		c.startErr = errors.New("no broker")
		var g lifecycle.Group
		g.Add("a", a).Add("b", b).Add("c", c)
		err := g.Start(ctx)
		require.ErrorContains(t, err, "start c: no broker")
		require.Equal(t, []string{"start a", "start b", "fail c", "stop c", "stop b", "stop a"}, log.List(),
			"the failed child and the ones started before it are stopped, newest first")
		require.NoError(t, g.Stop(ctx), "nothing is left to stop")
		require.Len(t, log.List(), 6)
	})

	t.Run("UnwindOutlivesStartContext", func(t *testing.T) {
		t.Parallel()
		var log lifecycletest.Events
		a, b := newPart("a", &log), newPart("b", &log)
		b.startErr = errors.New("boom")
		var g lifecycle.Group
		g.Add("a", a).Add("b", b)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		require.Error(t, g.Start(cctx))
		require.Equal(t, []string{"start a", "fail b", "stop b", "stop a"}, log.List())
	})

	t.Run("StopBoundedByDeadline", func(t *testing.T) {
		t.Parallel()
		var log lifecycletest.Events
		a, b := newPart("a", &log), newPart("b", &log)
		b.stuck = make(chan struct{})
		var g lifecycle.Group
		g.Add("a", a).Add("b", b)
		require.NoError(t, g.Start(ctx))
		sctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		defer cancel()
		err := g.Stop(sctx)
		require.ErrorContains(t, err, "stop b")
		require.ErrorIs(t, err, context.DeadlineExceeded)
		select {
		case <-a.stopped:
		default:
			t.Fatal("a child after one that did not stop in time is still stopped")
		}
		close(b.stuck)
	})

	t.Run("StartStopStress", func(t *testing.T) {
		t.Parallel()
		var g lifecycle.Group
		for _, name := range []string{"a", "b", "c"} {
			r := &lifecycle.Runner{Name: name, Run: func(ctx context.Context) { <-ctx.Done() }}
			g.Add(name, r)
		}
		lifecycletest.Stress(t, &g, lifecycletest.Options{})
	})
}

func TestRunner(t *testing.T) {
	t.Parallel()
	t.Run("StartStopStress", func(t *testing.T) {
		t.Parallel()
		lifecycletest.Stress(t, &lifecycle.Runner{Name: "x", Run: func(ctx context.Context) { <-ctx.Done() }}, lifecycletest.Options{})
	})
	t.Run("StopNamesIt", func(t *testing.T) {
		t.Parallel()
		release := make(chan struct{})
		r := &lifecycle.Runner{Name: "stuck thing", Run: func(context.Context) { <-release }}
		require.NoError(t, r.Start(context.Background()))
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		require.ErrorContains(t, r.Stop(ctx), "stop stuck thing")
		close(release)
		<-r.Done()
		require.NoError(t, r.Stop(context.Background()))
	})
}
