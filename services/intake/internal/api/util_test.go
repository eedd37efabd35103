package api

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/turnstile-run/turnstile/pkg/wire"
)

func decodeEnvelope(t testing.TB, v []byte) wire.Envelope {
	t.Helper()
	env, err := wire.DecodeEnvelope(v)
	require.NoError(t, err)
	return env
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }
