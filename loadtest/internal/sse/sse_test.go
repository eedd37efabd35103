package sse

import (
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestReader(t *testing.T) {
	t.Parallel()
	body := "retry: 1000\n\n: keep-alive\n\nid: e1:1-0\nevent: turn.started\ndata: {\"a\":1}\n\n" +
		"event: turn.delta\ndata: line1\ndata: line2\n\nevent: empty\n\n"
	r := NewReader(strings.NewReader(body))
	ev, err := r.Next()
	require.NoError(t, err)
	require.Equal(t, Event{ID: "e1:1-0", Type: "turn.started", Data: `{"a":1}`}, ev)
	ev, err = r.Next()
	require.NoError(t, err)
	require.Equal(t, Event{Type: "turn.delta", Data: "line1\nline2"}, ev)
	_, err = r.Next()
	require.ErrorIs(t, err, io.EOF)
}
