package sse_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/config"
	"github.com/turnstile-run/turnstile/pkg/streamtoken"
	"github.com/turnstile-run/turnstile/pkg/testenv"
	"github.com/turnstile-run/turnstile/pkg/wire"
	"github.com/turnstile-run/turnstile/services/gateway/internal/revoke"
	"github.com/turnstile-run/turnstile/services/gateway/internal/sse"
)

// TestRevokedKeyEndsStreams reproduces the seen run: after its API key is revoked, a stream
// token's open stream ends with stream.revoked within the watcher's interval, and a new stream
// with the same token is refused with 401; another key's stream goes on.
func TestRevokedKeyEndsStreams(t *testing.T) {
	t.Parallel()
	f := setup(t, 0)
	signer := streamtoken.New(streamtoken.Options{Keys: []config.SigningKey{{ID: "k1", Secret: []byte("0123456789abcdef0123456789abcdef")}}, TTL: time.Hour})
	var revoked atomic.Bool
	w := revoke.New(revoke.Config{Window: time.Hour, Interval: 20 * time.Millisecond},
		revoke.SourceFunc(func(context.Context, time.Duration) ([]string, error) {
			if revoked.Load() {
				return []string{"key-a"}, nil
			}
			return nil, nil
		}), testenv.TestLogger(t))
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, w.Stop(ctx))
	})
	gw := f.replica(sse.Config{Tokens: signer, Revocations: w})
	session := newSession()
	turn := newTurn()
	f.publish(session, turn, 0, 1, false, "")
	tokenA := signer.SignKey("key-a", wire.DefaultTenant, session) // the fixture publishes to the default tenant's session
	tokenB := signer.SignKey("key-b", wire.DefaultTenant, session)

	a := testenv.OpenSSE(t, gw.url(session)+"?access_token="+tokenA, "")
	b := testenv.OpenSSE(t, gw.url(session)+"?access_token="+tokenB, "")
	require.Equal(t, http.StatusOK, a.Resp.StatusCode)
	a.Until(t, 10*time.Second, isIndex(0))
	b.Until(t, 10*time.Second, isIndex(0))

	revoked.Store(true)
	evs := a.Ended(t, 10*time.Second)
	require.NotEmpty(t, evs)
	require.Equal(t, string(wire.EventStreamRevoked), evs[len(evs)-1].Type, "the stream ends with a clear event")

	resp, err := http.Get(gw.url(session) + "?access_token=" + tokenA)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "a new stream with the old token")
	require.Equal(t, "unauthenticated", problemType(t, resp))

	f.publish(session, turn, 1, 1, true, "")
	b.Until(t, 10*time.Second, isIndex(1))
}
