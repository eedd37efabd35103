package streams

import (
	"testing"
)

// FuzzParseCursor feeds arbitrary Last-Event-ID values to the cursor parser: it must never panic,
// and whatever it accepts must print back to a string that parses to the same cursor.
func FuzzParseCursor(f *testing.F) {
	for _, seed := range []string{
		"k3f9:1732881234567-0", "a:0-0", "$", "", ":", "x:1", "x:1-", "x:-1", "X:1-0",
		"abc:01-0", "abc:1-00", "abc:18446744073709551615-18446744073709551615", "abc:18446744073709551616-0",
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa:1-0", "e:1-0:2-0", "é:1-0",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseCursor(s)
		if err != nil {
			return
		}
		again, err := ParseCursor(c.String())
		if err != nil {
			t.Fatalf("%q parsed to %v, whose string %q does not parse: %v", s, c, c.String(), err)
		}
		if again != c {
			t.Fatalf("%q: round trip changed %v to %v", s, c, again)
		}
		if c.String() != s {
			t.Fatalf("%q was accepted but is not canonical (%q)", s, c.String())
		}
	})
}
