package testenv

import (
	"net"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestFreeAddrReserves: the addresses FreeAddr hands out are distinct while their tests run,
// outside the kernel's ephemeral range (so no listener on :0 or outgoing connection takes them),
// and bindable; a port reserved by another holder is passed over.
func TestFreeAddrReserves(t *testing.T) {
	lo, hi := reservablePorts()
	if lo >= hi {
		t.Skip("the kernel's ephemeral port range is unknown here; FreeAddr falls back to a port it picked")
	}
	seen := map[string]bool{}
	for range 64 {
		addr := FreeAddr(t)
		require.False(t, seen[addr], "handed out twice: %s", addr)
		seen[addr] = true
		_, p, err := net.SplitHostPort(addr)
		require.NoError(t, err)
		port, err := strconv.Atoi(p)
		require.NoError(t, err)
		require.GreaterOrEqual(t, port, lo)
		require.Less(t, port, hi)
		ln, err := net.Listen("tcp", addr)
		require.NoError(t, err, "the reserved port is free")
		require.NoError(t, ln.Close())
	}
	// A subtest's reservations end with it; the parent's stay.
	var inner string
	t.Run("sub", func(t *testing.T) { inner = FreeAddr(t) })
	require.False(t, seen[inner])
}
