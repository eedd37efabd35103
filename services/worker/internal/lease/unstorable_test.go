package lease

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/turnstore"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

// TestUnstorable checks that records Postgres cannot store fail only their own claims in a batch,
// are told apart from other errors, and can be claimed in their Storable form.
func TestUnstorable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := setup(t)
	s := NewStore(env.Pool, "a", time.Minute, 3)

	good := request("unstorable-good")
	nulText := request("unstorable-text")
	nulText.Env.Input.Text = "a\x00b"
	nulMetadata := request("unstorable-metadata")
	nulMetadata.Env.Metadata = map[string]any{"k": "a\x00b"}
	nulMetadata.RawMetadata = json.RawMessage(`{"k":"a\u0000b"}`)
	bad := []ClaimRequest{nulText, nulMetadata}

	res := s.ClaimMany(ctx, append([]ClaimRequest{good}, bad...))
	require.NoError(t, res[0].Err, "a good record batched with bad ones is claimed")
	require.Equal(t, turnstore.ClaimAcquired, res[0].Val.Outcome)
	for i, r := range res[1:] {
		require.Error(t, r.Err, "request %d", i)
		require.True(t, IsUnstorable(r.Err), "request %d: %v", i, r.Err)
	}
	require.False(t, IsUnstorable(context.Canceled))

	for i, req := range bad {
		c, err := s.Claim(ctx, Storable(req))
		require.NoError(t, err, "request %d", i)
		require.Equal(t, turnstore.ClaimAcquired, c.Outcome, "request %d", i)
		require.Equal(t, 1, c.Attempt)
	}
	var input string
	require.NoError(t, env.Pool.QueryRow(ctx, `SELECT input->>'text' FROM turns WHERE turn_id = $1`,
		nulText.Env.TurnID).Scan(&input))
	require.Equal(t, "a\uFFFDb", input)
	require.Equal(t, wire.Input{Text: "a\x00b"}, nulText.Env.Input, "Storable leaves the request it was given alone")
}
