package offsets

import (
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func TestTracker(t *testing.T) {
	t.Parallel()
	t.Run("Defaults", func(t *testing.T) {
		t.Parallel()
		tr := New(10)
		require.Equal(t, int64(10), tr.CommitPoint())
		require.Zero(t, tr.Outstanding())
	})
	t.Run("OutOfOrderCompletion", func(t *testing.T) {
		t.Parallel()
		tr := New(0)
		for o := int64(0); o < 5; o++ {
			require.True(t, tr.Add(o))
		}
		tr.Done(3)
		tr.Done(1)
		require.Equal(t, int64(0), tr.CommitPoint())
		tr.Done(0)
		require.Equal(t, int64(2), tr.CommitPoint())
		tr.Done(2)
		require.Equal(t, int64(4), tr.CommitPoint())
		tr.Done(4)
		require.Equal(t, int64(5), tr.CommitPoint())
		p, moved := tr.Commit()
		require.True(t, moved)
		require.Equal(t, int64(5), p)
		_, moved = tr.Commit()
		require.False(t, moved)
	})
	t.Run("RefetchIgnored", func(t *testing.T) {
		t.Parallel()
		tr := New(0)
		require.True(t, tr.Add(7))
		require.False(t, tr.Add(7))
		require.False(t, tr.Add(3))
		require.Equal(t, 1, tr.Outstanding())
	})
}

// TestTrackerNeverCommitsPastUnfinished checks, for random arrival gaps and completion orders, that
// the commit point never passes an unfinished record and reaches the end once all finish.
func TestTrackerNeverCommitsPastUnfinished(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		start := rapid.Int64Range(0, 1000).Draw(t, "start")
		n := rapid.IntRange(1, 60).Draw(t, "n")
		tr := New(start)
		offs := make([]int64, 0, n)
		o := start
		for range n {
			o += rapid.Int64Range(0, 3).Draw(t, "gap") // compaction and control records leave gaps
			require.True(t, tr.Add(o))
			offs = append(offs, o)
			o++
		}
		order := rapid.Permutation(offs).Draw(t, "order")
		finished := map[int64]bool{}
		for _, off := range order {
			tr.Done(off)
			finished[off] = true
			p := tr.CommitPoint()
			for _, x := range offs {
				if x < p && !finished[x] {
					t.Fatalf("commit point %d passes unfinished offset %d", p, x)
				}
			}
		}
		require.Equal(t, offs[len(offs)-1]+1, tr.CommitPoint())
		require.Zero(t, tr.Outstanding())
	})
}

func TestTrackerUnknownStart(t *testing.T) {
	t.Parallel()
	tr := New(-1)
	_, moved := tr.Commit()
	require.False(t, moved, "an unknown start must never be committed")
	require.True(t, tr.Add(42))
	tr.Done(42)
	p, moved := tr.Commit()
	require.True(t, moved)
	require.Equal(t, int64(43), p)
}
