package frontdoor

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/turnstile-run/turnstile/pkg/httpx"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestProblemRelay(t *testing.T) {
	t.Parallel()
	native := httptest.NewRecorder()
	p := httpx.ProblemRateLimited.Problem("tenant a is over its rate")
	p.RetryAfter = 3 * time.Second
	httpx.WriteProblem(native, p)

	got := problemFrom(native.Result(), native.Body.Bytes())
	require.Equal(t, http.StatusTooManyRequests, got.Status)
	require.True(t, got.Of(httpx.ProblemRateLimited), got.Type)
	require.Equal(t, 3*time.Second, got.RetryAfter)
	require.Equal(t, "tenant a is over its rate", got.Detail)

	relayed := httptest.NewRecorder()
	got.Write(relayed)
	require.Equal(t, http.StatusTooManyRequests, relayed.Code)
	require.Equal(t, "3", relayed.Header().Get("Retry-After"))
	require.Equal(t, "application/problem+json", relayed.Header().Get("Content-Type"))
	require.Equal(t, native.Body.String(), relayed.Body.String(), "the native document is relayed byte for byte")
}

func TestProblemFromANonProblemBody(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	rec.WriteHeader(http.StatusBadGateway)
	_, _ = rec.WriteString("<html>bad gateway</html>")
	got := problemFrom(rec.Result(), rec.Body.Bytes())
	require.Equal(t, http.StatusBadGateway, got.Status)
	require.Equal(t, "about:blank", got.Type)
	require.Empty(t, got.Body, "a body that is not a problem document is not relayed")

	relayed := httptest.NewRecorder()
	got.Write(relayed)
	require.Equal(t, http.StatusBadGateway, relayed.Code)
	require.Equal(t, "application/problem+json", relayed.Header().Get("Content-Type"))
}

// TestProblemRelaysChallenge: a native 401 is relayed with its WWW-Authenticate challenge.
func TestProblemRelaysChallenge(t *testing.T) {
	t.Parallel()
	native := httptest.NewRecorder()
	native.Header().Set("WWW-Authenticate", httpx.InvalidTokenChallenge)
	httpx.WriteProblem(native, httpx.ProblemUnauthenticated.Problem("the API key is unknown or revoked"))
	got := problemFrom(native.Result(), native.Body.Bytes())
	relayed := httptest.NewRecorder()
	got.Write(relayed)
	require.Equal(t, http.StatusUnauthorized, relayed.Code)
	require.Equal(t, httpx.InvalidTokenChallenge, relayed.Header().Get("WWW-Authenticate"))
}
