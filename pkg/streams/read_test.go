package streams

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestReadMany: each session is answered as Read would, in the requests' order, whether the
// sessions share one transaction (one Redis node) or each has its own (Redis Cluster, here against
// the one local node).
func TestReadMany(t *testing.T) {
	t.Parallel()
	for _, single := range []bool{true, false} {
		name := "OneTransaction"
		if !single {
			name = "TransactionPerSession"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testReadMany(t, single)
		})
	}
}

func testReadMany(t *testing.T, single bool) {
	ctx := context.Background()
	rdb, prefix := benchRedis(ctx, t)
	p := NewPublisher(rdb, prefix, 10000, time.Hour)
	r := NewReader(rdb, prefix)
	r.single = single
	for s := range 3 {
		for i := range s + 2 {
			_, err := p.Publish(ctx, sk("s"+strconv.Itoa(s)), "t", 1, delta("t", i), "")
			require.NoError(t, err)
		}
	}
	epoch1, first1, err := r.Read(ctx, sk("s1"), EntryID{}, 1)
	require.NoError(t, err)
	require.Len(t, first1, 1)

	res := r.ReadMany(ctx, []ReadRequest{
		{Session: sk("s2"), Count: 10},
		{Session: sk("none"), Count: 10},
		{Session: sk("s1"), After: first1[0].ID, Count: 10},
		{Session: sk("s0"), Count: 1},
	})
	require.Len(t, res, 4)
	for i, want := range []int{4, 0, 2, 1} {
		require.NoError(t, res[i].Err)
		require.Len(t, res[i].Entries, want, "request %d", i)
		epoch, entries, err := r.Read(ctx, sk([]string{"s2", "none", "s1", "s0"}[i]), []EntryID{{}, {}, first1[0].ID, {}}[i], []int64{10, 10, 10, 1}[i])
		require.NoError(t, err)
		require.Equal(t, epoch, res[i].Epoch, "request %d", i)
		require.Equal(t, entries, res[i].Entries, "request %d", i)
	}
	require.Equal(t, epoch1, res[2].Epoch)
	require.Empty(t, res[1].Epoch, "a session without a stream has no epoch")
	require.NotEqual(t, res[0].Epoch, res[3].Epoch, "each session's own epoch")

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	for _, r := range r.ReadMany(cctx, []ReadRequest{{Session: sk("s0"), Count: 1}, {Session: sk("s1"), Count: 1}}) {
		require.ErrorIs(t, r.Err, context.Canceled, "a failed round trip is every session's error")
	}
}
