package consume

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/turnstile-run/turnstile/pkg/testenv"
)

// TestWaiting: a consumer says it waits for its group assignment until the group has given it
// one, and naming the session timeout that bounds the wait, then waits for nothing.
func TestWaiting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, _ := setup(t, Config{MaxInflight: 1, SessionTimeout: 7 * time.Second},
		func(context.Context, *kgo.Record) Result { return Commit })
	err := c.Waiting()
	require.ErrorIs(t, err, ErrNoAssignment)
	require.Contains(t, err.Error(), "7s")
	require.NoError(t, c.Start(ctx))
	t.Cleanup(func() { require.NoError(t, c.Stop(ctx)) })
	testenv.WaitFor(t, 20*time.Second, "the first group assignment", func() bool { return c.Waiting() == nil })

	t.Run("Defaults", func(t *testing.T) {
		t.Parallel()
		d, _ := setup(t, Config{MaxInflight: 1}, func(context.Context, *kgo.Record) Result { return Commit })
		t.Cleanup(func() { require.NoError(t, d.Stop(ctx)) })
		require.ErrorContains(t, d.Waiting(), "45s", "without a session timeout the client's default bounds the wait")
	})
}
