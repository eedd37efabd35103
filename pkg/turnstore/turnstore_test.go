package turnstore

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/turnstile-run/turnstile/pkg/wire"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).backgroundHealthCheck"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).reaper"),
	)
}

// TestTextConst checks that a column's text maps to its constant without an allocation, and that
// text outside the constants is kept as it is. It is not parallel: AllocsPerRun refuses to run in
// a parallel test.
func TestTextConst(t *testing.T) {
	require.Equal(t, ClaimAcquired, textConst([]byte("ACQUIRED"), outcomes))
	require.Equal(t, wire.StatusSucceeded, textConst([]byte("succeeded"), statuses))
	require.Equal(t, ClaimOutcome("NEW"), textConst([]byte("NEW"), outcomes))
	b := []byte("running")
	require.Zero(t, testing.AllocsPerRun(100, func() { _ = textConst(b, statuses) }))
}

// TestInclude checks that a fragment replaces its include line whole, that an empty fragment leaves
// no line behind, and that a statement without the line is refused.
func TestInclude(t *testing.T) {
	t.Parallel()
	stmt := "WITH a AS (\n-- include: f.sql\n)\nSELECT 1"
	require.Equal(t, "WITH a AS (\n    SELECT 2\n)\nSELECT 1", include(stmt, "f.sql", "    SELECT 2\n"))
	require.Equal(t, "WITH a AS (\n    SELECT 2\n)\nSELECT 1", include(stmt, "f.sql", "    SELECT 2"))
	require.Equal(t, "WITH a AS (\n)\nSELECT 1", include(stmt, "f.sql", ""))
	require.Panics(t, func() { include(stmt, "g.sql", "SELECT 2") })
	for name, sql := range map[string]string{
		"renew": renewSQL, "complete": completeSQL,
		"queued": insertQueuedSQL, "queued with sessions": insertQueuedWithSessionsSQL,
	} {
		require.NotContains(t, sql, "-- include:", name)
	}
	require.True(t, strings.Contains(insertQueuedWithSessionsSQL, "INSERT INTO sessions"))
	require.False(t, strings.Contains(insertQueuedSQL, "INSERT INTO sessions"))
}
