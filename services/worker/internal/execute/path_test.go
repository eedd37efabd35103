package execute

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/pkg/wire"
	"github.com/turnstile-run/turnstile/services/worker/internal/agent/agenttest"
	"github.com/turnstile-run/turnstile/services/worker/internal/consume"
)

// TestChain checks that chain runs its stages in the order given, the first outermost, then the
// last handler, and that a stage which returns without calling next ends the turn's way there.
func TestChain(t *testing.T) {
	t.Parallel()
	var ran []string
	named := func(name string, end bool) stage {
		return func(next handler) handler {
			return func(t *turn) consume.Result {
				ran = append(ran, name)
				if end {
					return consume.Defer
				}
				res := next(t)
				ran = append(ran, "/"+name)
				return res
			}
		}
	}
	last := func(*turn) consume.Result { ran = append(ran, "last"); return consume.HandOff }

	require.Equal(t, consume.HandOff, chain(last, named("a", false), named("b", false), named("c", false))(&turn{}))
	require.Equal(t, []string{"a", "b", "c", "last", "/c", "/b", "/a"}, ran)

	ran = nil
	require.Equal(t, consume.Defer, chain(last, named("a", false), named("b", true), named("c", false))(&turn{}))
	require.Equal(t, []string{"a", "b", "/a"}, ran, "b ended the way: c and last never ran")
}

// TestStages runs real turns with a stage inserted at each position of the turn path and checks
// what the turn has become by then: the record before decode, a decoded turn before the claim, a
// turn holding its lease after it. So the path's order is what stages assembles, and a stage added
// there sees the turn as the stages before it left it. A stage inserted before the claim can also
// end the turn's way: the record is deferred and nothing is claimed.
func TestStages(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Partitions: 1})
	f := newUpstreamFixture(t, env, fixtureOptions{},
		func(int) agenttest.ChatAnswer { return agenttest.ChatAnswer{Words: []string{"ok"}} })
	ctx := context.Background()
	status := func(id uuid.UUID) string {
		var s string
		if err := env.Pool.QueryRow(ctx, `SELECT status FROM turns WHERE turn_id = $1`, id).Scan(&s); err != nil {
			return "no row"
		}
		return s
	}
	// seenBy is a stage that notes how far the turn has come and hands it on.
	seenBy := func(seen *string) stage {
		return func(next handler) handler {
			return func(t *turn) consume.Result {
				switch {
				case t.env.TurnID == uuid.Nil:
					*seen = "record"
				case t.acq.attempt == 0:
					*seen = "decoded, " + status(t.env.TurnID)
				default:
					*seen = "claimed, " + status(t.env.TurnID)
				}
				return next(t)
			}
		}
	}

	want := []string{
		"record",           // before decode
		"decoded, no row",  // before repeat
		"decoded, no row",  // before expireEarly
		"decoded, no row",  // before claimLease
		"claimed, running", // before runAttempt
	}
	require.Len(t, f.x.stages(), len(want)-1)
	for at, w := range want {
		var seen string
		f.x.path = chain(f.x.runAttempt, slices.Insert(f.x.stages(), at, seenBy(&seen))...)
		rec, e := f.record(t, time.Minute)
		require.Equal(t, consume.Commit, f.x.Handle(ctx, rec), "inserted at %d", at)
		require.Equal(t, w, seen, "inserted at %d", at)
		require.Equal(t, string(wire.StatusSucceeded), status(e.TurnID), "inserted at %d", at)
	}

	refuse := func(handler) handler { return func(*turn) consume.Result { return consume.Defer } }
	f.x.path = chain(f.x.runAttempt, slices.Insert(f.x.stages(), len(f.x.stages())-1, refuse)...)
	rec, e := f.record(t, time.Minute)
	require.Equal(t, consume.Defer, f.x.Handle(ctx, rec))
	require.Equal(t, "no row", status(e.TurnID), "a stage before the claim ended the turn's way: nothing was claimed")
	require.Empty(t, f.events(t, e.SessionID), "nothing was published")
}
