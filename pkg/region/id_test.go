package region_test

import (
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/region"
	"github.com/turnstile-run/turnstile/pkg/wire"
)

func TestValidCode(t *testing.T) {
	t.Parallel()
	for code, ok := range map[string]bool{
		"euw1": true, "use1": true, "ab": true, "abcdefgh": true, "a1": true,
		"": false, "a": false, "abcdefghi": false, "1abc": false, "Euw1": false, "eu-w": false, "eu_w": false, "é1": false,
	} {
		require.Equal(t, ok, region.ValidCode(code), code)
	}
}

func TestNewID(t *testing.T) {
	t.Parallel()
	t.Run("Prefixed", func(t *testing.T) {
		t.Parallel()
		id := region.NewID("euw1")
		require.True(t, strings.HasPrefix(id, "euw1-"), id)
		code, u, err := region.ParseUUID(id)
		require.NoError(t, err)
		require.Equal(t, "euw1", code)
		require.Equal(t, uuid.Version(7), u.Version())
		require.Equal(t, "euw1-"+u.String(), id)
	})
	t.Run("SingleRegion", func(t *testing.T) {
		t.Parallel()
		id := region.NewID("")
		u, err := uuid.Parse(id)
		require.NoError(t, err)
		require.Equal(t, u.String(), id, "a bare UUIDv7, as before regions")
	})
	t.Run("TimeOrdered", func(t *testing.T) {
		t.Parallel()
		a, b := region.NewID("euw1"), region.NewID("euw1")
		require.Less(t, a, b)
	})
}

func TestParseUUID(t *testing.T) {
	t.Parallel()
	u := uuid.MustParse("0192f3c4-5d6e-7f80-9a1b-2c3d4e5f6a7b")
	// A bare UUID whose first group looks like a region code must still parse as bare.
	letters := uuid.MustParse("deadbeef-5d6e-7f80-9a1b-2c3d4e5f6a7b")
	cases := []struct {
		name, id, code string
		want           uuid.UUID
		ok             bool
	}{
		{"Bare", u.String(), "", u, true},
		{"BareLetters", letters.String(), "", letters, true},
		{"Prefixed", "euw1-" + u.String(), "euw1", u, true},
		{"PrefixedLetters", "use1-" + letters.String(), "use1", letters, true},
		{"LongestCode", "abcdefgh-" + u.String(), "abcdefgh", u, true},
		{"BadCode", "EUW1-" + u.String(), "", uuid.Nil, false},
		{"CodeTooLong", "abcdefghi-" + u.String(), "", uuid.Nil, false},
		{"Braced", "euw1-{" + u.String() + "}", "", uuid.Nil, false},
		{"NoDashes", "euw1-" + strings.ReplaceAll(u.String(), "-", ""), "", uuid.Nil, false},
		{"TwoPrefixes", "euw1-use1-" + u.String(), "", uuid.Nil, false},
		{"Empty", "", "", uuid.Nil, false},
		{"Text", "euw1-hello", "", uuid.Nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, got, err := region.ParseUUID(tc.id)
			if !tc.ok {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.code, code)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestSplit(t *testing.T) {
	t.Parallel()
	code, rest, ok := region.Split("euw1-abc")
	require.True(t, ok)
	require.Equal(t, "euw1", code)
	require.Equal(t, "abc", rest)
	for _, id := range []string{"euw1", "-abc", "E-abc", "1ab-c", "a-b", ""} {
		_, rest, ok := region.Split(id)
		require.False(t, ok, id)
		require.Equal(t, id, rest, "an unsplit ID is returned whole")
	}
}

func TestLocal(t *testing.T) {
	t.Parallel()
	m, err := region.Parse([]byte(`{"regions":[{"code":"euw1","url":"http://a"},{"code":"use1","url":"http://b"}]}`))
	require.NoError(t, err)
	u := uuid.Must(uuid.NewV7()).String()
	t.Run("SingleRegionChecksNothing", func(t *testing.T) {
		t.Parallel()
		l := region.Local{Map: m}
		_, bad := l.Minted("use1-" + u)
		require.False(t, bad)
		_, bad = l.Chosen("use1-chat")
		require.False(t, bad)
	})
	t.Run("Minted", func(t *testing.T) {
		t.Parallel()
		for _, l := range []region.Local{{Code: "euw1", Map: m}, {Code: "euw1"}} {
			owner, bad := l.Minted("use1-" + u)
			require.True(t, bad)
			require.Equal(t, "use1", owner)
			owner, bad = l.Minted("apse2-" + u)
			require.True(t, bad, "a minted shape names its owner even when the map lacks it")
			require.Equal(t, "apse2", owner)
			for _, own := range []string{"euw1-" + u, u, "deadbeef-5d6e-7f80-9a1b-2c3d4e5f6a7b", "garbage"} {
				_, bad = l.Minted(own)
				require.False(t, bad, own)
			}
		}
	})
	t.Run("Chosen", func(t *testing.T) {
		t.Parallel()
		l := region.Local{Code: "euw1", Map: m}
		owner, bad := l.Chosen("use1-chat-42")
		require.True(t, bad)
		require.Equal(t, "use1", owner)
		for _, own := range []string{"euw1-chat", "user-" + u, "chat", "apse2-" + u} {
			_, bad = l.Chosen(own)
			require.False(t, bad, own)
		}
		_, bad = region.Local{Code: "euw1"}.Chosen("use1-chat")
		require.False(t, bad, "without a map a client's choice is never foreign")
	})
	t.Run("Misdirected", func(t *testing.T) {
		t.Parallel()
		l := region.Local{Code: "euw1", Map: m}
		owner, bad := l.Misdirected("use1-chat", "")
		require.True(t, bad)
		require.Equal(t, "use1", owner)
		owner, bad = l.Misdirected("chat", "apse2-"+u)
		require.True(t, bad)
		require.Equal(t, "apse2", owner)
		_, bad = l.Misdirected("euw1-chat", "euw1-"+u)
		require.False(t, bad)
		_, bad = l.Misdirected("", "")
		require.False(t, bad)
	})
}

// FuzzParseUUID: the parser never panics, and whatever it accepts prints back, in the canonical
// form, to an ID that parses to the same region and UUID.
func FuzzParseUUID(f *testing.F) {
	for _, seed := range []string{
		"0192f3c4-5d6e-7f80-9a1b-2c3d4e5f6a7b", "euw1-0192f3c4-5d6e-7f80-9a1b-2c3d4e5f6a7b",
		"deadbeef-5d6e-7f80-9a1b-2c3d4e5f6a7b", "urn:uuid:0192f3c4-5d6e-7f80-9a1b-2c3d4e5f6a7b",
		"{0192f3c4-5d6e-7f80-9a1b-2c3d4e5f6a7b}", "0192f3c45d6e7f809a1b2c3d4e5f6a7b", "a-", "-", "",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, id string) {
		code, u, err := region.ParseUUID(id)
		if err != nil {
			return
		}
		if code != "" && !region.ValidCode(code) {
			t.Fatalf("%q: accepted with invalid code %q", id, code)
		}
		again := region.Prefix(code, u.String())
		code2, u2, err := region.ParseUUID(again)
		if err != nil || code2 != code || u2 != u {
			t.Fatalf("%q: canonical %q parses to %q %v %v", id, again, code2, u2, err)
		}
	})
}

// TestShownTurnIDIsPrefix: the envelope's shown turn ID, spelt in pkg/wire, is Prefix.
func TestShownTurnIDIsPrefix(t *testing.T) {
	t.Parallel()
	id, client := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
	for _, code := range []string{"", "euw1"} {
		e := wire.Envelope{TurnID: id, Region: code}
		require.Equal(t, region.Prefix(code, id.String()), e.ShownTurnID())
		e.ClientTurnID = client
		require.Equal(t, region.Prefix(code, client.String()), e.ShownTurnID())
	}
}
