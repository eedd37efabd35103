package frontdoor

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/httpx"
)

// TestParseDeadline: no header is no deadline, milliseconds since the epoch are the deadline, and
// anything else is intake's invalid-deadline problem, refused before anything is queued.
func TestParseDeadline(t *testing.T) {
	t.Parallel()
	dl, err := ParseDeadline("")
	require.NoError(t, err)
	require.True(t, dl.IsZero())
	dl, err = ParseDeadline("1700000000000")
	require.NoError(t, err)
	require.Equal(t, time.UnixMilli(1700000000000), dl)
	for _, bad := range []string{"-1", "0", "soon", "1.5e12"} {
		_, err = ParseDeadline(bad)
		var p *Problem
		require.True(t, errors.As(err, &p), bad)
		require.True(t, p.Of(httpx.ProblemInvalidDeadline), bad)
		require.Equal(t, 400, p.Status)
	}
}
