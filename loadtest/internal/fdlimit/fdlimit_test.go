package fdlimit

import (
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestNeed(t *testing.T) {
	// 40,000 turns four to a session: 10,000 streams and the window's 64, with 500 posts.
	require.Equal(t, 2*(10_064+500)+Spare, Need(40_000, 4, 64, 500, true))
	require.Equal(t, 10_064+500+Spare, Need(40_000, 4, 64, 500, false), "the server elsewhere holds its own ends")
	require.Equal(t, 2*(10+3)+Spare, Need(0, 4, 10, 3, true), "no backlog: the window's sessions")
	require.Equal(t, 2*(1000+64)+Spare, Need(1000, 0, 64, 0, true), "a session a turn at least")
}

func TestRaise(t *testing.T) {
	var before syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &before))
	got, err := Raise()
	require.NoError(t, err)
	var after syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &after))
	require.Equal(t, after.Cur, got, "it returns the soft limit it left")
	require.GreaterOrEqual(t, after.Cur, before.Cur)
	require.GreaterOrEqual(t, after.Cur, before.Max, "the soft limit reaches at least the hard limit it had")
}

func TestFits(t *testing.T) {
	require.NoError(t, Fits(20_000, 20_000))
	require.NoError(t, Fits(1<<30, 0), "unknown limit")
	err := Fits(22_128, 20_000)
	require.ErrorContains(t, err, "needs about 22128 open files")
	require.ErrorContains(t, err, "limit of 20000")
}

func TestTurnsPerSessionThatFits(t *testing.T) {
	// A burst's predicted backlog on a 20,000 limit with the stack in process: five to a session
	// need 20,504 files, six 17,672.
	k, ok := TurnsPerSessionThatFits(42_481, 4, 64, 1_192, true, 20_000)
	require.True(t, ok)
	require.Equal(t, 6, k)
	require.Error(t, Fits(Need(42_481, 5, 64, 1_192, true), 20_000), "five does not fit")
	_, ok = TurnsPerSessionThatFits(42_481, 4, 64, 1_192, true, 3_000)
	require.False(t, ok, "the posts alone exceed the limit")
}
