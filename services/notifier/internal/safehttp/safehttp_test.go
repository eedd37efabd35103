package safehttp

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestPublic: every special-purpose range of IANA's registries is refused, an address that embeds
// or relays to another is refused whatever it embeds, and ordinary global addresses pass.
func TestPublic(t *testing.T) {
	t.Parallel()
	refused := []string{
		"0.0.0.1", "10.1.2.3", "100.64.0.1", "127.0.0.1", "169.254.169.254", "172.16.0.1",
		"192.0.0.8", "192.0.2.1", "192.31.196.1", "192.52.193.1", "192.88.99.1", "192.168.1.1",
		"192.175.48.1", "198.18.0.1", "198.51.100.1", "203.0.113.1", "224.0.0.1", "240.0.0.1",
		"255.255.255.255",
		"::", "::1", "::7f00:1", "::8.8.8.8", "::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:0:7f00:1",
		"::ffff:0:808:808", "64:ff9b::7f00:1", "64:ff9b:1::1", "100::1", "2001::1", "2001:0:4136:e378::1",
		"2001:2::1", "2001:10::1", "2001:db8::1", "2002:7f00:1::1", "3fff::1", "5f00::1", "fc00::1",
		"fd12:3456::1", "fe80::1", "fec0::1", "feff::1", "ff02::1",
	}
	for _, a := range refused {
		require.False(t, Public(netip.MustParseAddr(a)), "%s must not count as public", a)
	}
	for _, a := range []string{"8.8.8.8", "1.1.1.1", "::ffff:8.8.8.8", "2606:4700:4700::1111", "2a00:1450:4001::1"} {
		require.True(t, Public(netip.MustParseAddr(a)), "%s is public", a)
	}
}

// TestCheckURLRefusesSpecialLiterals: a literal special-purpose address in a webhook URL is refused
// before any connection, in both address families.
func TestCheckURLRefusesSpecialLiterals(t *testing.T) {
	t.Parallel()
	c := New(Options{})
	for _, u := range []string{
		"https://[::7f00:1]/hook", "https://[2001::1]/hook", "https://[fec0::1]/hook",
		"https://[::ffff:0:7f00:1]/hook", "https://192.88.99.1/hook",
	} {
		_, err := c.CheckURL(u)
		require.ErrorIs(t, err, ErrRefused, u)
	}
	_, err := c.CheckURL("https://[2606:4700:4700::1111]/hook")
	require.NoError(t, err)
}
