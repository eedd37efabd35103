package streams

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/wire"
)

func TestKeysFor(t *testing.T) {
	session := wire.NewSessionKey("acme", "sess-1")
	k := KeysFor("ts", session)
	require.Equal(t, Keys{Events: "ts:s:{acme/sess-1}:events", Meta: "ts:s:{acme/sess-1}:meta", Notify: "ts:s:{acme/sess-1}:notify"}, k)
	require.Equal(t, Keys{Events: ":s:{}:events", Meta: ":s:{}:meta", Notify: ":s:{}:notify"}, KeysFor("", wire.SessionKey{}))
	// The three names share one allocation.
	require.Equal(t, 1.0, testing.AllocsPerRun(100, func() { k = KeysFor("ts", session) }))
}
