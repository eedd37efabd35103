package streams

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestKeysFor(t *testing.T) {
	k := KeysFor("ts", "sess-1")
	require.Equal(t, Keys{Events: "ts:s:{sess-1}:events", Meta: "ts:s:{sess-1}:meta", Notify: "ts:s:{sess-1}:notify"}, k)
	require.Equal(t, Keys{Events: ":s:{}:events", Meta: ":s:{}:meta", Notify: ":s:{}:notify"}, KeysFor("", ""))
	// The three names share one allocation.
	require.Equal(t, 1.0, testing.AllocsPerRun(100, func() { k = KeysFor("ts", "sess-1") }))
}
