package consume

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReadyHeapOrder pushes and pops ready sessions in random interleavings, offsets repeated, and
// checks every pop returns the lowest offset held, as a sorted model says.
func TestReadyHeapOrder(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		var h readyHeap
		var model []int64
		for op := range 300 {
			if len(model) > 0 && rng.IntN(3) == 0 {
				got := h.pop()
				slices.Sort(model)
				require.Equal(t, model[0], got.offset, "round %d, op %d", round, op)
				model = model[1:]
				continue
			}
			off := rng.Int64N(50)
			h.push(readySession{s: &session{sk: sessionKey{key: strconv.FormatInt(off, 10)}}, offset: off})
			model = append(model, off)
		}
		slices.Sort(model)
		for _, want := range model {
			got := h.pop()
			require.Equal(t, want, got.offset)
			require.Equal(t, strconv.FormatInt(want, 10), got.s.sk.key, "a session keeps its own offset")
		}
		require.Empty(t, h)
	}
}
