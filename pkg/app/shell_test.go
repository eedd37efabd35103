package app

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/lifecycle"
	"github.com/turnstile-run/turnstile/pkg/lifecycle/lifecycletest"
)

// stepPart is a part that records its start and stop.
type stepPart struct {
	name string
	log  *lifecycletest.Events
}

func (p stepPart) Start(context.Context) error { p.log.Add("start " + p.name); return nil }
func (p stepPart) Stop(context.Context) error  { p.log.Add("stop " + p.name); return nil }

// recordingShell is a shell whose parts a, b and hooks record into log.
func recordingShell(log *lifecycletest.Events) ShellConfig {
	var parts lifecycle.Group
	parts.Add("a", stepPart{"a", log}).Add("b", stepPart{"b", log})
	return ShellConfig{
		Name:  "role",
		Parts: &parts,
		Drain: func(context.Context) { log.Add("drain") },
		Wait:  func(context.Context) error { log.Add("wait"); return nil },
		Close: func(context.Context) error { log.Add("close"); return nil },
	}
}

func TestShell(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("StopOrder", func(t *testing.T) {
		t.Parallel()
		var log lifecycletest.Events
		s := NewShell(recordingShell(&log))
		require.ErrorContains(t, s.Ready(), "not running")
		require.NoError(t, s.Start(ctx))
		require.NoError(t, s.Ready())
		require.NoError(t, s.Stop(ctx))
		require.ErrorContains(t, s.Ready(), "not running")
		require.Equal(t, []string{"start a", "start b", "drain", "wait", "stop b", "stop a", "close"}, log.List(),
			"streams end and are waited for before the parts stop; what the role opened closes last")
		require.NoError(t, s.Stop(ctx), "Stop twice")
		require.EqualError(t, s.Start(ctx), "start role: stopped")
		require.Len(t, log.List(), 7, "the second Stop and the Start after Stop ran nothing")
	})

	t.Run("StopBeforeStartCloses", func(t *testing.T) {
		t.Parallel()
		var log lifecycletest.Events
		s := NewShell(recordingShell(&log))
		require.NoError(t, s.Stop(ctx))
		require.Equal(t, []string{"drain", "wait", "close"}, log.List(),
			"a role built and never started releases what its constructor opened")
		require.Error(t, s.Start(ctx))
	})

	t.Run("StopErrorsJoinedAndKept", func(t *testing.T) {
		t.Parallel()
		waitErr, closeErr := errors.New("streams still open"), errors.New("flush failed")
		s := NewShell(ShellConfig{
			Name:  "role",
			Wait:  func(context.Context) error { return waitErr },
			Close: func(context.Context) error { return closeErr },
		})
		require.NoError(t, s.Start(ctx))
		err := s.Stop(ctx)
		require.ErrorIs(t, err, waitErr)
		require.ErrorIs(t, err, closeErr)
		require.Equal(t, err, s.Stop(ctx), "a later Stop returns the first one's error")
	})

	t.Run("StopBoundedByDeadline", func(t *testing.T) {
		t.Parallel()
		release := make(chan struct{})
		defer close(release)
		var parts lifecycle.Group
		parts.Add("stuck", &lifecycle.Runner{Name: "stuck part", Run: func(context.Context) { <-release }})
		closed := false
		s := NewShell(ShellConfig{Name: "role", Parts: &parts, Close: func(context.Context) error { closed = true; return nil }})
		require.NoError(t, s.Start(ctx))
		sctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		defer cancel()
		err := s.Stop(sctx)
		require.ErrorContains(t, err, "stop stuck part")
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.True(t, closed, "what the role opened closes even when a part did not stop in time")
	})

	t.Run("FailedStartUnwinds", func(t *testing.T) {
		t.Parallel()
		var log lifecycletest.Events
		var parts lifecycle.Group
		parts.Add("a", stepPart{"a", &log}).Add("b", lifecycle.StartFunc(func(context.Context) error { return errors.New("no topic") }))
		s := NewShell(ShellConfig{Name: "role", Parts: &parts})
		require.ErrorContains(t, s.Start(ctx), "start b: no topic")
		require.ErrorContains(t, s.Ready(), "not running", "a role that failed to start is not ready")
		require.Equal(t, []string{"start a", "stop a"}, log.List())
		require.NoError(t, s.Stop(ctx))
	})

	t.Run("ReadySaysWhatItWaitsFor", func(t *testing.T) {
		t.Parallel()
		s := NewShell(ShellConfig{Name: "role", Ready: func() error { return errors.New("waiting for kafka") }})
		require.ErrorContains(t, s.Ready(), "not running", "not asked before Start")
		require.NoError(t, s.Start(ctx))
		require.EqualError(t, s.Ready(), "waiting for kafka")
		require.NoError(t, s.Stop(ctx))
		require.ErrorContains(t, s.Ready(), "not running")
	})

	t.Run("DrainDropsReadiness", func(t *testing.T) {
		t.Parallel()
		var log lifecycletest.Events
		s := NewStreamShell(recordingShell(&log))
		var _ Drainer = s
		require.NoError(t, s.Start(ctx))
		s.Drain(ctx)
		require.ErrorContains(t, s.Ready(), "not running", "a draining role is not ready")
		require.NoError(t, s.Stop(ctx))
		require.Equal(t, []string{"start a", "start b", "drain", "drain", "wait", "stop b", "stop a", "close"}, log.List())
	})

	t.Run("NoStreamsNoDrainer", func(t *testing.T) {
		t.Parallel()
		_, ok := any(NewShell(ShellConfig{Name: "role"})).(Drainer)
		require.False(t, ok, "a role without streams keeps serving until Stop")
	})

	t.Run("StartStopStress", func(t *testing.T) {
		t.Parallel()
		var parts lifecycle.Group
		for _, name := range []string{"a", "b"} {
			parts.Add(name, &lifecycle.Runner{Name: name, Run: func(ctx context.Context) { <-ctx.Done() }})
		}
		lifecycletest.Stress(t, NewStreamShell(ShellConfig{Name: "role", Parts: &parts}), lifecycletest.Options{OneShot: true})
	})
}
