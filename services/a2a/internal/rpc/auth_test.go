package rpc

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/frontdoor"
	"github.com/turnstile-run/turnstile/pkg/httpx"
)

// fakeWho answers Whoami with err, counting the calls.
type fakeWho struct {
	calls atomic.Int32
	err   error
}

func (f *fakeWho) Whoami(context.Context, frontdoor.Credential) (string, error) {
	f.calls.Add(1)
	return "acme", f.err
}

func TestKeyCheck(t *testing.T) {
	t.Parallel()
	key := "ts_0123456789ab_" + strings.Repeat("k", 43)
	req := func(auth string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/a2a", nil)
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		return r
	}
	t.Run("NoKeyAsksNobody", func(t *testing.T) {
		who := &fakeWho{}
		k := newKeyCheck(who)
		for _, auth := range []string{"", "Bearer ", "Basic " + key, "Bearer not-a-key"} {
			no := k.check(req(auth))
			require.NotNil(t, no, auth)
			require.Equal(t, http.StatusUnauthorized, no.status)
			require.True(t, strings.HasPrefix(no.challenge, "Bearer realm="), no.challenge)
		}
		require.Zero(t, who.calls.Load())
	})
	t.Run("AcceptedKeyIsRemembered", func(t *testing.T) {
		who := &fakeWho{}
		k := newKeyCheck(who)
		now := time.Unix(1000, 0)
		k.now = func() time.Time { return now }
		require.Nil(t, k.check(req("Bearer "+key)))
		require.Nil(t, k.check(req("bearer "+key)))
		require.EqualValues(t, 1, who.calls.Load())
		now = now.Add(keyCheckTTL)
		require.Nil(t, k.check(req("Bearer "+key)))
		require.EqualValues(t, 2, who.calls.Load(), "asked again after keyCheckTTL")
	})
	t.Run("RefusedKeyIsNotRemembered", func(t *testing.T) {
		who := &fakeWho{err: &frontdoor.Problem{Status: http.StatusUnauthorized, Challenge: httpx.InvalidTokenChallenge}}
		k := newKeyCheck(who)
		for range 2 {
			no := k.check(req("Bearer " + key))
			require.Equal(t, http.StatusUnauthorized, no.status)
			require.Equal(t, httpx.InvalidTokenChallenge, no.challenge)
		}
		require.EqualValues(t, 2, who.calls.Load())
	})
	t.Run("UncheckableKeyIsRetryable", func(t *testing.T) {
		k := newKeyCheck(&fakeWho{err: &frontdoor.Problem{Status: http.StatusServiceUnavailable, RetryAfter: 2 * time.Second}})
		no := k.check(req("Bearer " + key))
		require.Equal(t, http.StatusServiceUnavailable, no.status)
		require.Equal(t, 2*time.Second, no.retry)
		require.Empty(t, no.challenge)
		k = newKeyCheck(&fakeWho{err: &frontdoor.Problem{Status: http.StatusTooManyRequests}})
		require.Equal(t, http.StatusTooManyRequests, k.check(req("Bearer "+key)).status)
	})
}
